package node

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/blocks"
)

// metrics are the node's Prometheus metrics.
type metrics struct {
	builds        *prometheus.CounterVec // db, result
	buildProgress *prometheus.GaugeVec   // db
	buildRecords  *prometheus.GaugeVec   // db
	buildDuration *prometheus.GaugeVec   // db
	streamed      *prometheus.CounterVec // db
	records       *prometheus.GaugeVec   // db
	bytes         *prometheus.GaugeVec   // db
	indexBytes    *prometheus.GaugeVec   // db
	active        *prometheus.GaugeVec   // db, version
	refreshErrors prometheus.Counter
	corrupt       *prometheus.CounterVec // db, where (open, serving)
	removed       *prometheus.CounterVec // reason (missing, empty, operator)

	// Healing (heal.go).
	healed       *prometheus.CounterVec // db
	healLoads    *prometheus.CounterVec // db
	healFailures *prometheus.CounterVec // db
	healing      *prometheus.GaugeVec   // db

	// Listings (list.go): partitions read per page, here or from peers.
	listPartitions *prometheus.CounterVec // where (local, remote)
	// Partitions continued from a kept position, and the positions'
	// memory (list_positions.go).
	listContinued     prometheus.Counter
	listPositionBytes prometheus.Gauge

	// Peer copies (peercopy.go) and what builds read of the source.
	sourceRead       *prometheus.CounterVec // db
	peerCopy         *prometheus.CounterVec // db, result
	peerCopyMismatch *prometheus.CounterVec // db
	peerCopyResumed  *prometheus.CounterVec // db
	buildOnce        *prometheus.CounterVec // db, outcome
	peerCopyRest     *prometheus.CounterVec // db

	// Versions refused by a guard (checks.go).
	refusals *prometheus.CounterVec // db, check

	// Delta versions and digests (delta.go, checks.go).
	deltaBuilds  *prometheus.CounterVec // db
	digestChecks *prometheus.CounterVec // db, result (ok, mismatch, absent)

	// The memory release after a build (memory.go).
	memRelease prometheus.Histogram

	mu             sync.Mutex        // guards activeVersions
	activeVersions map[string]string // db → version labelled in active
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		builds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spangle_builds_total", Help: "Version builds finished, by db and result (ok, error).",
		}, []string{"db", "result"}),
		buildProgress: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "spangle_build_progress_ratio", Help: "Progress of the db's current or last build, 0 to 1 (bytes read of bytes total).",
		}, []string{"db"}),
		buildRecords: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "spangle_build_records", Help: "Records read by the db's current or last build.",
		}, []string{"db"}),
		buildDuration: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "spangle_build_duration_seconds", Help: "Duration of the db's last successful build.",
		}, []string{"db"}),
		streamed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spangle_build_streamed_partitions_total",
			Help: "Partitions of successful builds written straight from their Sparkey logs, in the logs' key order (not loaded and sorted), by db.",
		}, []string{"db"}),
		records: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "spangle_version_records", Help: "Records held locally in the db's active version.",
		}, []string{"db"}),
		bytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "spangle_version_bytes", Help: "Bytes of keys and values held locally in the db's active version.",
		}, []string{"db"}),
		indexBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "spangle_version_index_bytes", Help: "Memory of the db's active version's in-memory indexes of s2-blocks blocks by first key (24 bytes a block besides its first key).",
		}, []string{"db"}),
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "spangle_active_version", Help: "1 for the db's active version.",
		}, []string{"db", "version"}),
		refreshErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "spangle_source_errors_total", Help: "Failed listings of the source.",
		}),
		corrupt: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spangle_corrupt_versions_total",
			Help: "Local versions found damaged (files that differ from their manifest, or pages bbolt cannot read), by db and where: at open (removed and rebuilt) or while serving (rebuilt, then switched to).",
		}, []string{"db", "where"}),
		removed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spangle_dbs_removed_total",
			Help: "Dbs removed from this node (versions closed, data deleted), by reason: missing (absent from the source for remove_missing_after), empty (absent from the source, holding no version), operator (DELETE /admin/dbs/<db>).",
		}, []string{"reason"}),
		healed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spangle_heal_partitions_total", Help: "Partitions of an active version this node loaded because they had lost replicas, by db.",
		}, []string{"db"}),
		healLoads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spangle_heal_loads_total", Help: "Successful heal loads (one pass over the source for up to heal_max_parallel partitions), by db.",
		}, []string{"db"}),
		healFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spangle_heal_failures_total", Help: "Partitions whose heal load failed (retried after heal_after), by db.",
		}, []string{"db"}),
		healing: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "spangle_heal_in_progress_partitions", Help: "Partitions this node is loading for healing now, by db.",
		}, []string{"db"}),
		listPartitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spangle_list_partitions_total",
			Help: "Partitions read by key listings' pages, by where: local (this node's copy) or remote (asked of the peers holding them). A prefix the partitioner keeps together reads one.",
		}, []string{"where"}),
		listContinued: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "spangle_list_continued_partitions_total",
			Help: "Local partitions a listing's page continued where its previous page, read on this node, left them ([storage] list_positions), instead of seeking them and decoding their block again.",
		}),
		listPositionBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "spangle_list_positions_bytes",
			Help: "Memory of the listings' positions kept between pages (decoded blocks), bounded by [storage] list_positions.",
		}),
		sourceRead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spangle_source_read_bytes_total",
			Help: "Bytes builds and heals read from the source, by db.",
		}, []string{"db"}),
		peerCopy: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spangle_peer_copy_bytes_total",
			Help: "Bytes of partition files copied from peers instead of built from the source, by db and result: ok (matched the manifest, served), mismatch (did not: discarded, refetched from another holder), dropped (of an interrupted copy not resumed).",
		}, []string{"db", "result"}),
		peerCopyMismatch: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spangle_peer_copy_mismatches_total",
			Help: "Partition files copied from a peer that did not match its manifest (never served; refetched from another holder), by db.",
		}, []string{"db"}),
		peerCopyResumed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spangle_peer_copy_resumed_total",
			Help: "Partition file copies continued from another holder where an interrupted one stopped (Range), by db.",
		}, []string{"db"}),
		buildOnce: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spangle_build_once_total",
			Help: "New versions no peer held yet, by db and what this node did (build once): built (it was the builder: every partition, from the source), copied (from the builder), failed (it was the builder and its build failed: it said so, and its peers built their own), fallback (built its own partitions from the source: the builder failed, did not publish within build_once_wait, or its copy failed).",
		}, []string{"db", "outcome"}),
		peerCopyRest: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spangle_peer_copy_fallback_partitions_total",
			Help: "Partitions of a version or a heal that no peer gave (none held them, or every holder's copy failed), built from the source while the others were copied, by db.",
		}, []string{"db"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spangle_version_refusals_total",
			Help: "Versions refused activation by a guard of their db (min_records, max_change, canary_keys), by db and check; a refused version waits, REFUSED, for an operator (spangle activate --force) or a newer version.",
		}, []string{"db", "check"}),
		deltaBuilds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spangle_delta_builds_total",
			Help: "Versions built here as deltas over a base (the bases built on the way included), by db.",
		}, []string{"db"}),
		digestChecks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spangle_digest_checks_total",
			Help: "Versions checked against their _DIGEST before activation (and each base built on the way to a delta), by db and result: ok, mismatch (the version failed), absent (no _DIGEST: not checked).",
		}, []string{"db", "result"}),
		memRelease: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "spangle_memory_release_seconds",
			Help:    "Duration of the memory release after a build (a forced collection, then free pages given back to the OS), run beside the dbs' loops.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
		}),
		activeVersions: map[string]string{},
	}
	if reg != nil {
		reg.MustRegister(m.builds, m.buildProgress, m.buildRecords, m.buildDuration, m.streamed, m.records, m.bytes, m.indexBytes, m.active, m.refreshErrors, m.corrupt, m.removed,
			m.healed, m.healLoads, m.healFailures, m.healing, m.listPartitions, m.listContinued, m.listPositionBytes,
			m.sourceRead, m.peerCopy, m.peerCopyMismatch, m.peerCopyResumed, m.buildOnce, m.peerCopyRest, m.refusals, m.deltaBuilds, m.digestChecks, m.memRelease)
	}
	return m
}

func (m *metrics) activeVersion(db, version string, v *blocks.Version) {
	mf := v.Manifest()
	m.records.WithLabelValues(db).Set(float64(mf.Records))
	m.bytes.WithLabelValues(db).Set(float64(mf.Bytes))
	m.indexBytes.WithLabelValues(db).Set(float64(v.IndexBytes()))
	// The db's series exist from its first version on, for dashboards.
	m.sourceRead.WithLabelValues(db)
	m.peerCopy.WithLabelValues(db, copyOK)
	m.buildOnce.WithLabelValues(db, onceBuilt)
	m.peerCopyRest.WithLabelValues(db)
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.activeVersions[db]; ok {
		m.active.DeleteLabelValues(db, old)
	}
	m.activeVersions[db] = version
	m.active.WithLabelValues(db, version).Set(1)
}

func (m *metrics) forgetDB(db string) {
	for _, v := range []*prometheus.GaugeVec{m.buildProgress, m.buildRecords, m.buildDuration, m.records, m.bytes, m.indexBytes, m.healing} {
		v.DeleteLabelValues(db)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.activeVersions[db]; ok {
		m.active.DeleteLabelValues(db, old)
		delete(m.activeVersions, db)
	}
}
