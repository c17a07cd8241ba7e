package kvcluster

import (
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/kvwatch"
	"github.com/spangledb/spangle/node/advert"
	"github.com/spangledb/spangle/node/cluster"
)

// View is cluster.View over a kvwatch.KV: it follows the KV's
// snapshots (Subscribe) and turns each into a cluster.Snapshot of the
// nodes and partitions buckets, decoding the entries; invalid entries are
// skipped, counted (spangle_cluster_invalid_entries) and logged when their
// number grows. One goroutine, started by Start,
// does the conversion; Cluster never blocks. Safe for concurrent use.
type View struct {
	follower
	log *slog.Logger

	cur atomic.Pointer[viewState]
	// invalid counts the entries of the current snapshot that do not
	// decode or break a bound (forged, or from a newer spangle), by
	// bucket: spangle_cluster_invalid_entries{bucket}.
	invalid     *prometheus.GaugeVec
	lastInvalid [2]int // the run goroutine's: to log only growth
}

// viewState is one published snapshot and the channel closed when the
// next one replaces it.
type viewState struct {
	snap    *cluster.Snapshot
	changed chan struct{}
}

// NewView returns a view of kv's buckets; it starts nothing. A
// nil log discards.
func NewView(kv *kvwatch.KV, log *slog.Logger) *View {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	v := &View{follower: newFollower(kv), log: log.With("component", "cluster_view"),
		invalid: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "spangle_cluster_invalid_entries",
			Help: "Entries of the nodes and partitions buckets that the node ignores because they do not decode or break a bound (forged, or written by a newer spangle), by bucket.",
		}, []string{"bucket"})}
	v.cur.Store(&viewState{snap: cluster.NewSnapshot(nil, nil, true), changed: make(chan struct{})})
	return v
}

// RegisterMetrics registers the view's metrics with reg.
func (v *View) RegisterMetrics(reg prometheus.Registerer) error {
	return reg.Register(v.invalid)
}

// Start subscribes to the KV's snapshots and follows them until Stop or
// the KV's Shutdown. It may be called before the KV has started (the view
// is then empty and stale). It is idempotent.
func (v *View) Start() { v.start(v.run) }

// Stop stops following the KV and waits for the goroutine; the last
// snapshot stays readable. It is idempotent; calling it without Start is
// allowed.
func (v *View) Stop() { v.stop() }

func (v *View) run(ch <-chan *kvwatch.Snapshot) {
	for s := range ch {
		next := &viewState{snap: v.convert(s), changed: make(chan struct{})}
		old := v.cur.Swap(next)
		close(old.changed)
	}
}

// convert decodes the nodes and partitions buckets of s.
func (v *View) convert(s *kvwatch.Snapshot) *cluster.Snapshot {
	var bad [2]int
	var firstErr [2]error
	skip := func(i int, key string, err error) {
		if bad[i] == 0 {
			firstErr[i] = fmt.Errorf("%s: %w", key, err)
		}
		bad[i]++
	}
	var nodes []advert.Node
	s.Range(kvwatch.Nodes, "", func(key string, e kvwatch.Entry) bool {
		n, err := advert.DecodeNode(key, e.Value)
		if err != nil {
			skip(0, key, err)
			return true
		}
		nodes = append(nodes, n)
		return true
	})
	var parts []advert.Partitions
	s.Range(kvwatch.Partitions, "", func(key string, e kvwatch.Entry) bool {
		p, err := advert.DecodePartitions(key, e.Value)
		if err != nil {
			skip(1, key, err)
			return true
		}
		parts = append(parts, p)
		return true
	})
	for i, bucket := range []string{"nodes", "partitions"} {
		v.invalid.WithLabelValues(bucket).Set(float64(bad[i]))
		if bad[i] > v.lastInvalid[i] {
			v.log.Warn("ignoring invalid cluster entries (forged, or from a newer spangle)",
				"bucket", bucket, "entries", bad[i], "first", firstErr[i])
		}
		v.lastInvalid[i] = bad[i]
	}
	return cluster.NewSnapshot(nodes, parts, s.Stale())
}

// Cluster implements cluster.View.
func (v *View) Cluster() (*cluster.Snapshot, <-chan struct{}) {
	st := v.cur.Load()
	return st.snap, st.changed
}

var _ cluster.View = (*View)(nil)
