package node

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// versionStates are the states spangle_db_versions reports for every db,
// a zero included: an alert on "no ACTIVE version" needs the zero.
var versionStates = []string{StateBuilding, StateAvailable, StateActive, StateRemoving, StateError, StateRefused}

// statusCollector derives gauges from Ready and Status at scrape time,
// so that they cannot disagree with /readyz and the status page: the
// readiness, each db's versions by this node's state, and the
// replication of each db's active version as the status counts it. A
// scrape costs one Status call (each db's status lock, briefly; in
// cluster mode the view's merge).
type statusCollector struct {
	n           *Node
	ready       *prometheus.Desc
	versions    *prometheus.Desc
	underrepl   *prometheus.Desc
	missing     *prometheus.Desc
	replication *prometheus.Desc
	missingSrc  *prometheus.Desc
}

func newStatusCollector(n *Node) *statusCollector {
	return &statusCollector{
		n: n,
		ready: prometheus.NewDesc("spangle_ready",
			"1 while the node is ready (GET /readyz answers 200: initial load done, not draining, the cluster's buckets watched, something to serve), else 0.", nil, nil),
		versions: prometheus.NewDesc("spangle_db_versions",
			"Versions of the db on this node, by this node's state (BUILDING, AVAILABLE, ACTIVE, REMOVING, ERROR, REFUSED: refused by the db's guards, waiting for an operator); every state is reported, 0 included.",
			[]string{"db", "state"}, nil),
		underrepl: prometheus.NewDesc("spangle_db_underreplicated_partitions",
			"Partitions of the db's active version on this node held by fewer live nodes than the target replication (cluster mode; 0 for a node alone).",
			[]string{"db"}, nil),
		missing: prometheus.NewDesc("spangle_db_missing_partitions",
			"Partitions of the db's active version on this node that no live node holds.",
			[]string{"db"}, nil),
		replication: prometheus.NewDesc("spangle_db_target_replication",
			"Replicas each partition of the db's active version should have (1 for a node alone).",
			[]string{"db"}, nil),
		missingSrc: prometheus.NewDesc("spangle_db_missing_from_source_seconds",
			"Seconds since a listing of the source first lacked the db, which keeps serving until remove_missing_after or an operator removes it; 0 while the source lists it.",
			[]string{"db"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *statusCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.ready, c.versions, c.underrepl, c.missing, c.replication, c.missingSrc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *statusCollector) Collect(ch chan<- prometheus.Metric) {
	ready := 0.0
	if c.n.Ready() {
		ready = 1
	}
	ch <- prometheus.MustNewConstMetric(c.ready, prometheus.GaugeValue, ready)
	self := c.n.Name()
	st := c.n.Status()
	for db, ds := range st.DBs {
		counts := make(map[string]int, len(versionStates))
		for _, vs := range ds.Versions {
			nv, ok := vs.Nodes[self]
			if !ok {
				continue // a version only peers hold (cluster mode)
			}
			if slices.Contains(versionStates, nv.State) {
				counts[nv.State]++
			}
			if nv.Current {
				ch <- prometheus.MustNewConstMetric(c.underrepl, prometheus.GaugeValue, float64(vs.UnderreplicatedPartitions), db)
				ch <- prometheus.MustNewConstMetric(c.missing, prometheus.GaugeValue, float64(vs.MissingPartitions), db)
				ch <- prometheus.MustNewConstMetric(c.replication, prometheus.GaugeValue, float64(vs.TargetReplication), db)
			}
		}
		missingFor := 0.0
		if ds.MissingSince != nil {
			missingFor = max(time.Since(*ds.MissingSince).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(c.missingSrc, prometheus.GaugeValue, missingFor, db)
		for _, s := range versionStates {
			ch <- prometheus.MustNewConstMetric(c.versions, prometheus.GaugeValue, float64(counts[s]), db, s)
		}
	}
}
