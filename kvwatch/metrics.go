package kvwatch

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics holds the package's collectors. They exist whether or not a
// Registerer was configured, so the code never checks.
type metrics struct {
	connected         prometheus.Gauge
	reconnects        prometheus.Counter
	heartbeatFailures prometheus.Counter
	conflicts         prometheus.Counter
	watcherRestarts   *prometheus.CounterVec
	bucketRepairs     *prometheus.CounterVec
	revision          *prometheus.GaugeVec
	staleSeconds      prometheus.GaugeFunc
	droppedNotifies   prometheus.Counter
	embeddedRestarts  prometheus.Counter
	refreshesSkipped  prometheus.Counter
	hubConnected      prometheus.Gauge
	registered        []prometheus.Collector
	registerer        prometheus.Registerer
}

func newMetrics(staleSeconds func() float64) *metrics {
	m := &metrics{
		connected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "spangle_kvwatch_connected",
			Help: "1 while the NATS connection is up, else 0.",
		}),
		reconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "spangle_kvwatch_reconnects_total",
			Help: "Reconnections to NATS after a lost connection.",
		}),
		heartbeatFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "spangle_kvwatch_heartbeat_failures_total",
			Help: "Refreshes of own TTL'd entries that failed while connected.",
		}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "spangle_kvwatch_key_conflicts_total",
			Help: "Own keys found holding someone else's value and taken back.",
		}),
		watcherRestarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spangle_kvwatch_watcher_restarts_total",
			Help: "Watchers re-created after a reconnect, a stall or a closed watcher, by bucket and mode (resume or reload).",
		}, []string{"bucket", "mode"}),
		bucketRepairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spangle_kvwatch_bucket_repairs_total",
			Help: "Buckets found deleted, re-created or purged under this node, whose own entries it wrote again, by bucket and reason.",
		}, []string{"bucket", "reason"}),
		revision: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "spangle_kvwatch_snapshot_revision",
			Help: "Highest bucket revision applied to the snapshot.",
		}, []string{"bucket"}),
		staleSeconds: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "spangle_kvwatch_snapshot_stale_seconds",
			Help: "How long the snapshot has been stale (disconnected or catching up); 0 while current.",
		}, staleSeconds),
		droppedNotifies: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "spangle_kvwatch_dropped_notifications_total",
			Help: "Snapshots replaced in a subscriber's channel before it read them.",
		}),
		refreshesSkipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "spangle_kvwatch_refreshes_skipped_total",
			Help: "Entries of the TTL'd buckets written again with the same value (heartbeats), which leave the snapshot as it is.",
		}),
		hubConnected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "spangle_kvwatch_hub_connected",
			Help: "In a region: 1 while the hub's JetStream answers through the leafnode, 0 while it does not, -1 before the first check or outside regions.",
		}),
		embeddedRestarts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "spangle_kvwatch_embedded_restarts_total",
			Help: "Restarts of the embedded NATS server after its store failed (a full disk), once space was back.",
		}),
	}
	m.hubConnected.Set(-1)
	return m
}

// register registers every collector with r; on failure it unregisters
// those already registered.
func (m *metrics) register(r prometheus.Registerer) error {
	if r == nil {
		return nil
	}
	all := []prometheus.Collector{m.connected, m.reconnects, m.heartbeatFailures, m.conflicts,
		m.watcherRestarts, m.bucketRepairs, m.revision, m.staleSeconds, m.droppedNotifies, m.embeddedRestarts, m.refreshesSkipped, m.hubConnected}
	for _, c := range all {
		if err := r.Register(c); err != nil {
			m.registerer = r
			m.unregister()
			return errors.Join(errors.New("kvwatch: register metrics"), err)
		}
		m.registered = append(m.registered, c)
	}
	m.registerer = r
	return nil
}

// unregister removes what register added.
func (m *metrics) unregister() {
	for _, c := range m.registered {
		m.registerer.Unregister(c)
	}
	m.registered = nil
}
