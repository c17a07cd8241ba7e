package edge

import (
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/internal/promreg"
)

// unknownDBLabel is the db label of lookups for dbs the backend does not
// know (and of failures that do not prove the db exists, for a db never
// seen before). Real db names are never empty, so it cannot collide with
// one, and it bounds the label's cardinality by the dbs the backend knows.
const unknownDBLabel = ""

// durationBuckets spans 50µs (a local hit) to 5s (a slow proxied lookup).
var durationBuckets = []float64{
	0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
	0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
}

// lookupCodes are the statuses a key lookup can end with; each db's
// counters for them are created (at zero) with its first lookup.
var lookupCodes = [...]int{200, 304, 404, 499, 500, 501, 502, 504}

// codeIndex returns status's index in lookupCodes, or -1.
func codeIndex(status int) int {
	switch status {
	case 200:
		return 0
	case 304:
		return 1
	case 404:
		return 2
	case 499:
		return 3
	case 500:
		return 4
	case 501:
		return 5
	case 502:
		return 6
	case 504:
		return 7
	}
	return -1
}

// metrics holds the HTTP metrics of key lookups and a per-db cache of
// label-bound handles, so that the hot path neither hashes label values nor
// allocates. Safe for concurrent use.
type metrics struct {
	requests *prometheus.CounterVec   // spangle_http_requests_total{db,code}
	duration *prometheus.HistogramVec // spangle_http_request_duration_seconds{db}
	inflight *gaugeInt                // spangle_http_inflight_requests
	// batchRejected counts batches refused for lack of room in the
	// in-flight budget (spangle_http_batch_rejected_total).
	batchRejected prometheus.Counter
	// peerRefused counts ?proxy= requests without the peer token
	// (spangle_http_peer_refused_total).
	peerRefused prometheus.Counter
	// listRequests counts key listings by status
	// (spangle_http_list_requests_total{code}), listKeys the keys they
	// returned (spangle_http_list_keys_total).
	listRequests *prometheus.CounterVec
	listKeys     prometheus.Counter

	// dbs maps db names to handles, for dbs the backend knows: read
	// without a lock, replaced by a copy with each new db (under dbsMu).
	dbs     atomic.Pointer[map[string]*dbHandle]
	dbsMu   sync.Mutex // serialises the copies of dbs
	unknown *dbHandle  // db=""

	// removed, when the backend can tell, says which dbs it has removed;
	// follow forgets their handles.
	removed  RemovedDBs
	followMu sync.Mutex // guards stopped
	stopped  bool
	quit     chan struct{}
	wg       sync.WaitGroup
}

// dbHandle is one db's metric handles and cached response headers.
type dbHandle struct {
	m        *metrics
	db       string
	dbVal    []string // X-Spangle-DB
	duration prometheus.Observer
	codes    [len(lookupCodes)]prometheus.Counter
	headers  atomic.Pointer[headerSet] // of the version served last
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spangle_http_requests_total",
			Help: "Key lookups served over HTTP, by db and status code. db is empty for dbs the backend does not know.",
		}, []string{"db", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "spangle_http_request_duration_seconds",
			Help:    "Time to answer a key lookup over HTTP, by db. db is empty for dbs the backend does not know.",
			Buckets: durationBuckets,
		}, []string{"db"}),
		inflight: newGaugeInt("spangle_http_inflight_requests", "Key lookups being answered over HTTP."),
		quit:     make(chan struct{}),
	}
	var err error
	if m.requests, err = register(reg, m.requests); err != nil {
		return nil, err
	}
	if m.duration, err = register(reg, m.duration); err != nil {
		return nil, err
	}
	if m.inflight, err = register(reg, m.inflight); err != nil {
		return nil, err
	}
	if m.peerRefused, err = register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "spangle_http_peer_refused_total",
		Help: "Peer requests (?proxy=) refused with 403 for lacking the cluster's peer token.",
	})); err != nil {
		return nil, err
	}
	if m.batchRejected, err = register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "spangle_http_batch_rejected_total",
		Help: "Batch lookups answered 503 because the node-wide budget of batch bytes in flight stayed full for batch_wait.",
	})); err != nil {
		return nil, err
	}
	if m.listRequests, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "spangle_http_list_requests_total",
		Help: "Key listings (GET /<db>/?prefix=...) answered over HTTP, peers' included, by status code.",
	}, []string{"code"})); err != nil {
		return nil, err
	}
	if m.listKeys, err = register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "spangle_http_list_keys_total",
		Help: "Keys returned by key listings over HTTP.",
	})); err != nil {
		return nil, err
	}
	if m.unknown, err = m.newHandle(unknownDBLabel); err != nil {
		return nil, err
	}
	return m, nil
}

// register is promreg.Register: a second Server on one registry shares the
// collectors of the first.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	return promreg.Register(reg, c)
}

func (m *metrics) newHandle(db string) (*dbHandle, error) {
	h := &dbHandle{m: m, db: db, dbVal: []string{db}}
	var err error
	if h.duration, err = m.duration.GetMetricWithLabelValues(db); err != nil {
		return nil, err
	}
	for i, code := range lookupCodes {
		if h.codes[i], err = m.requests.GetMetricWithLabelValues(db, strconv.Itoa(code)); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// known returns db's handle, creating it: call it only once the backend
// has shown that it knows db.
func (m *metrics) known(db string) *dbHandle {
	if h, ok := m.handle(db); ok {
		return h
	}
	m.dbsMu.Lock()
	defer m.dbsMu.Unlock()
	if h, ok := m.handle(db); ok {
		return h
	}
	h, err := m.newHandle(db)
	if err != nil { // a label value Prometheus refuses, e.g. invalid UTF-8
		return m.unknown
	}
	var dbs map[string]*dbHandle
	if p := m.dbs.Load(); p != nil {
		dbs = maps.Clone(*p)
	} else {
		dbs = map[string]*dbHandle{}
	}
	dbs[db] = h
	m.dbs.Store(&dbs)
	return h
}

// RemovedDBs is what the front doors need to forget a db the backend has
// removed (its metric series, cached headers): the
// held versions to follow, and whether a db is still there. *node.Node
// implements it; a Backend that does not is never forgotten.
type RemovedDBs interface {
	HeldSource
	HasDB(db string) bool
}

// follow starts the goroutine that forgets the handles of the dbs the
// backend removes, at each change of its held versions, until stop. It
// does nothing without m.removed, or after stop.
func (m *metrics) follow() {
	m.followMu.Lock()
	defer m.followMu.Unlock()
	if m.removed == nil || m.stopped {
		return
	}
	m.wg.Go(func() {
		for {
			_, changed := m.removed.Held()
			m.forget(m.removed.HasDB)
			select {
			case <-m.quit:
				return
			case <-changed:
			}
		}
	})
}

// stop ends follow's goroutine and waits for it; idempotent.
func (m *metrics) stop() {
	m.followMu.Lock()
	if !m.stopped {
		m.stopped = true
		close(m.quit)
	}
	m.followMu.Unlock()
	m.wg.Wait()
}

// forget drops the handles of the dbs has reports gone, and their
// db=<name> series: a removed db's lookups counted and timed stay out of
// /metrics, and its cached headers are freed. A
// lookup still holding a handle counts into a series no longer exported;
// one after it is the unknown db's.
func (m *metrics) forget(has func(db string) bool) {
	m.dbsMu.Lock()
	defer m.dbsMu.Unlock()
	p := m.dbs.Load()
	if p == nil {
		return
	}
	var dbs map[string]*dbHandle
	for db := range *p {
		if has(db) {
			continue
		}
		if dbs == nil {
			dbs = maps.Clone(*p)
		}
		delete(dbs, db)
		m.requests.DeletePartialMatch(prometheus.Labels{"db": db})
		m.duration.DeleteLabelValues(db)
	}
	if dbs != nil {
		m.dbs.Store(&dbs)
	}
}

// handle returns db's handle if it exists.
func (m *metrics) handle(db string) (*dbHandle, bool) {
	p := m.dbs.Load()
	if p == nil {
		return nil, false
	}
	h, ok := (*p)[db]
	return h, ok
}

// lookup returns db's handle if it exists, else the unknown-db handle.
func (m *metrics) lookup(db string) *dbHandle {
	if h, ok := m.handle(db); ok {
		return h
	}
	return m.unknown
}

// observe counts one lookup that ended with status after d.
func (h *dbHandle) observe(status int, d time.Duration) {
	h.duration.Observe(d.Seconds())
	if i := codeIndex(status); i >= 0 {
		h.codes[i].Inc()
		return
	}
	if c, err := h.m.requests.GetMetricWithLabelValues(h.db, strconv.Itoa(status)); err == nil {
		c.Inc()
	}
}

// gaugeInt is a gauge of a whole number kept in an atomic integer: Inc
// and Dec are one atomic add each, where a prometheus.Gauge's are a
// compare-and-swap loop on a float, contended by every request at once.
// Safe for concurrent use.
type gaugeInt struct {
	desc *prometheus.Desc
	n    atomic.Int64
}

func newGaugeInt(name, help string) *gaugeInt {
	return &gaugeInt{desc: prometheus.NewDesc(name, help, nil, nil)}
}

// Inc adds 1.
func (g *gaugeInt) Inc() { g.n.Add(1) }

// Dec subtracts 1.
func (g *gaugeInt) Dec() { g.n.Add(-1) }

// Describe implements prometheus.Collector.
func (g *gaugeInt) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

// Collect implements prometheus.Collector.
func (g *gaugeInt) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, float64(g.n.Load()))
}
