package edge

import (
	"context"
	"golang.org/x/sync/semaphore"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/spangledb/spangle/node"
)

// Backend is what the HTTP front door needs from a node. Implementations
// must be safe for concurrent use.
type Backend interface {
	// Get looks key up in db. The caller owns key; Get must not modify it
	// and must not keep it after returning. A missing key is a Result with
	// Found false and a nil error. Errors are those of node/errors.go
	// (wrapped or not), or the context's error when ctx ends first.
	Get(ctx context.Context, db string, key []byte, opts node.GetOptions) (node.Result, error)
	// Status returns the whole view; it is called for every status,
	// dashboard and /healthz request. The caller does not modify it.
	Status() node.Status
	// Ready reports whether the node should receive traffic (/readyz).
	Ready() bool
}

// Server is the HTTP front door. It is an http.Handler, usable on its own
// (ServeHTTP) or through Serve and Shutdown, which run it on an
// http.Server with Config's timeouts. Safe for concurrent use.
type Server struct {
	backend        Backend
	batch          BatchBackend  // nil: batch lookups are 501
	list           ListBackend   // nil: key listings are 501
	sourceError    func() string // nil: /readyz does not say why
	watchError     func() string // nil: /readyz does not say why
	nodeName       string
	sequinsHeaders bool
	cacheTags      bool
	gzipMin        int
	log            *slog.Logger
	metrics        *metrics
	panics         prometheus.Counter // spangle_panics_total{door="http"}
	metricsHandler http.Handler
	dashboard      *template.Template
	http           *http.Server
	tls            bool // Serve speaks HTTPS (http.TLSConfig)
	maxBatchKeys   int
	maxBatchBytes  int
	maxReplyBytes  int
	maxListKeys    int
	maxConns       int
	peerToken      []byte // nil: peers' requests are not checked
	batchWait      time.Duration
	// batchBytes is the budget of batch bytes in flight
	// (Config.BatchBytesInFlight).
	batchBytes *semaphore.Weighted
	startOnce  sync.Once  // starts the metrics' follower, from Serve
	alog       *AccessLog // nil: no access log
	parts      *partFiles // peer copies (partfile.go); nil: 501
	doors                 // the listener's two servers (fast_listen.go)
}

// NewServer validates cfg, registers the HTTP metrics on cfg.Registerer and
// returns a Server. It starts nothing.
func NewServer(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg, gath := cfg.Registerer, cfg.Gatherer
	if reg == nil {
		private := prometheus.NewRegistry()
		reg = private
		if gath == nil {
			gath = private
		} else {
			gath = prometheus.Gatherers{gath, private}
		}
	} else if gath == nil {
		gath = reg.(prometheus.Gatherer) // checked by Validate
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	m.removed, _ = cfg.Backend.(RemovedDBs) // a removed db's handles are forgotten

	panics, err := newPanicCounter(reg)
	if err != nil {
		return nil, err
	}
	dashboard, err := parseDashboard()
	if err != nil {
		return nil, err
	}
	s := &Server{
		panics:         panics.WithLabelValues("http"),
		backend:        cfg.Backend,
		batch:          cfg.Batch,
		list:           cfg.List,
		sourceError:    cfg.SourceError,
		watchError:     cfg.WatchError,
		nodeName:       cfg.NodeName,
		sequinsHeaders: cfg.SequinsHeaders,
		cacheTags:      cfg.CacheTags,
		gzipMin:        cfg.GzipMinBytes,
		log:            log,
		metrics:        m,
		metricsHandler: promhttp.HandlerFor(gath, promhttp.HandlerOpts{
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelError),
		}),
		dashboard:     dashboard,
		maxBatchKeys:  cfg.MaxBatchKeys,
		maxBatchBytes: cfg.MaxBatchBytes,
		maxReplyBytes: cfg.MaxBatchReplyBytes,
		maxListKeys:   cfg.MaxListKeys,
		maxConns:      cfg.MaxConns,
		peerToken:     peerToken(cfg.PeerToken),
		batchWait:     cfg.BatchWait,
		batchBytes:    semaphore.NewWeighted(cfg.BatchBytesInFlight),
		alog:          cfg.AccessLog,
	}
	if s.parts, err = newPartFiles(cfg, reg); err != nil {
		return nil, err
	}
	s.http = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ConnContext:       handedConnContext,
	}
	if err := s.newDoors(cfg, reg); err != nil {
		return nil, err
	}
	if cfg.TLS != nil {
		s.http.TLSConfig, s.tls = cfg.TLS.Clone(), true
		flood := prometheus.NewCounter(prometheus.CounterOpts{
			Name: "spangle_http2_reset_floods_total",
			Help: "HTTP/2 connections closed (GOAWAY ENHANCE_YOUR_CALM) for sending more than h2_max_resets RST_STREAM frames within h2_reset_window.",
		})
		if err := reg.Register(flood); err != nil {
			return nil, err
		}
		if err := s.serveH2(cfg, flood); err != nil { // h2_resets.go
			return nil, err
		}
	}
	return s, nil
}

// Serve accepts connections on l and serves them until Shutdown; it
// blocks. With Config.TLS they speak HTTPS. HTTP/1.1 connections are
// served by the fast path, HTTP/2 ones by net/http (fast_listen.go).
// It takes ownership of l and closes it. After Shutdown it returns nil;
// otherwise the error that stopped it.
func (s *Server) Serve(l net.Listener) error {
	s.startOnce.Do(func() {
		s.metrics.follow() // forgets the dbs the backend removes
	})
	err := s.serveDoors(newLimitListener(l, s.maxConns))
	if s.closingDoors() {
		return nil
	}
	return err
}

// Shutdown stops the server gracefully and is idempotent:
//
//  1. close the listeners, so that Serve returns;
//  2. close idle connections, and each busy one once its request is
//     answered, on both servers;
//  3. return when none is left; if ctx ends first, close the remaining
//     connections at once (their handlers see their requests' contexts
//     end) and return ctx's error;
//  4. stop the metrics' follower of versions.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.shutdownDoors(ctx)
	s.metrics.stop()
	return err
}

// ServeHTTP routes r by hand (see the package doc for the table).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.alog != nil && accessNote(w) == nil {
		s.alog.serve(s, w, r) // accesslog_http.go: back here, then the line
		return
	}
	defer s.recoverHTTP(w, r)
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		allow := valAllow
		if db, ok := batchPath(r.URL.Path); ok { // POST /<db>/_batch: batch.go
			if r.Method == http.MethodPost {
				s.serveBatch(w, r, db)
				return
			}
			allow = valAllowBatch
		}
		w.Header()[hdrCacheControl] = valNoStore
		if !knownMethod(r.Method) { // RFC 9110 §9.1: 501, where 405 says "not here"
			writeText(w, r, http.StatusNotImplemented, "method not implemented\n")
			return
		}
		w.Header()[hdrAllow] = allow
		writeText(w, r, http.StatusMethodNotAllowed, "method not allowed\n")
		return
	}
	rt, db, key := parsePath(r.URL.Path)
	if rt != routeKey {
		// Status, health and metrics describe this moment: no cache may
		// keep them.
		w.Header()[hdrCacheControl] = valNoStore
	}
	switch rt {
	case routeKey:
		s.serveKey(w, r, db, key)
	case routeDBStatus:
		if isPartFile(r.URL.RawQuery) {
			s.servePartFile(w, r, db) // partfile.go: peer copies
			return
		}
		if isListing(r.URL.RawQuery) {
			s.serveList(w, r, db) // list.go
			return
		}
		w.Header()[hdrVary] = valVaryAccept // JSON or HTML
		s.serveStatus(w, r, true, db)
	case routeStatus:
		w.Header()[hdrVary] = valVaryAccept // JSON or HTML
		s.serveStatus(w, r, false, db)
	case routeHealthz:
		s.serveHealthz(w, r)
	case routeLivez:
		writeText(w, r, http.StatusOK, "ok\n")
	case routeReadyz:
		s.serveReadyz(w, r)
	case routeMetrics:
		s.metricsHandler.ServeHTTP(w, r)
	default:
		writeText(w, r, http.StatusBadRequest, "bad request path\n")
		s.metrics.unknown.observe(http.StatusBadRequest, 0)
	}
}

// knownMethod reports whether method is one of RFC 9110's (§9.3) or
// PATCH (RFC 5789). Method names are case-sensitive: "get" is unknown.
func knownMethod(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete,
		http.MethodConnect, http.MethodOptions, http.MethodTrace, http.MethodPatch:
		return true
	}
	return false
}
