package node

import (
	"time"
)

// Version states, as sequins names them.
const (
	StateBuilding = "BUILDING"
	// StateAvailable: built and served to peers, not yet to clients
	// (cluster mode, waiting for min_replication).
	StateAvailable = "AVAILABLE"
	StateActive    = "ACTIVE"
	StateRemoving  = "REMOVING"
	StateError     = "ERROR"
	// StateRefused: built, held and served to peers, refused activation
	// by the db's guards (checks.go) until an operator forces it.
	StateRefused = "REFUSED"
)

// Status is the node's view of every db, as served at "/". Field names follow
// sequins where sequins has them.
type Status struct {
	DBs     map[string]DBStatus `json:"dbs"`
	ShardID string              `json:"shard_id"`
	// SourceError is why the last listing of the source's dbs failed;
	// empty once one succeeds.
	SourceError string `json:"source_error,omitempty"`
	// Release is the spangle release the node runs (Config.BinaryVersion).
	Release string `json:"release,omitempty"`
	// WatchError is why the node cannot follow the cluster's buckets
	// (Config.WatchError), which makes it not ready; empty while it can.
	WatchError string `json:"watch_error,omitempty"`
	// OtherPins holds, by db, the pins this node keeps for dbs it does
	// not serve (none in its source, or gone from it): they take effect
	// should the db appear.
	OtherPins map[string]string `json:"other_pins,omitempty"`
	// HotCache is the answer cache's memory ([storage] hot_cache); nil
	// when it is off.
	HotCache *CacheStatus `json:"hot_cache,omitempty"`
}

// DBStatus is one db's versions, as served at "/<db>/".
type DBStatus struct {
	Versions map[string]VersionStatus `json:"versions"`
	// SourceError is why the last listing of the db's versions failed;
	// empty once one succeeds.
	SourceError string `json:"source_error,omitempty"`
	// Pinned is the db's pin on this node (spangle rollback or
	// activate): a version, or "newest before <version>"; PinError is why
	// the node cannot follow it. Activation is "manual" for a db whose new
	// versions wait for an activation.
	Pinned     string `json:"pinned,omitempty"`
	PinError   string `json:"pin_error,omitempty"`
	Activation string `json:"activation,omitempty"`
	// MissingSince is when a listing of the source first lacked the db,
	// which keeps serving; nil while it is listed. RemoveAt is when the
	// node removes it if it stays missing (remove_missing_after); nil when
	// only an operator removes it.
	MissingSince *time.Time `json:"missing_from_source_since,omitempty"`
	RemoveAt     *time.Time `json:"remove_at,omitempty"`
}

// VersionStatus describes one version across the nodes this node knows of.
// Unlike sequins, the replication counters are computed in every mode and
// missing partitions are counted.
type VersionStatus struct {
	Path                      string                       `json:"path"`
	NumPartitions             int                          `json:"num_partitions"`
	TargetReplication         int                          `json:"target_replication"`
	ReplicationHistogram      map[int]int                  `json:"replication_histogram"`
	AverageReplication        float64                      `json:"average_replication"`
	MissingPartitions         int                          `json:"missing_partitions"`
	UnderreplicatedPartitions int                          `json:"underreplicated_partitions"`
	OverreplicatedPartitions  int                          `json:"overreplicated_partitions"`
	Nodes                     map[string]NodeVersionStatus `json:"nodes"`

	// spangle additions.
	Partitioner string         `json:"partitioner,omitempty"`
	Build       *BuildProgress `json:"build,omitempty"`
	// Heal is this node's healing of the version (cluster mode): nil
	// until it loads a partition of it for healing.
	Heal *HealStatus `json:"heal,omitempty"`
}

// NodeVersionStatus is one node's state for one version.
type NodeVersionStatus struct {
	Name       string     `json:"name"`
	CreatedAt  time.Time  `json:"created_at"`
	ActiveAt   *time.Time `json:"active_at,omitempty"` // nil: never active (sequins printed year 1)
	Current    bool       `json:"current"`
	State      string     `json:"state"`
	Partitions []int      `json:"partitions"`
	ShardID    string     `json:"shard_id"`
	Error      string     `json:"error,omitempty"`
	// Refused is why the db's guards refused the version (state REFUSED);
	// Forced is true once an operator activated it anyway.
	Refused string `json:"refused,omitempty"`
	Forced  bool   `json:"forced,omitempty"`
}

// BuildProgress reports a build under way or finished on this node.
type BuildProgress struct {
	FilesDone   int       `json:"files_done"`
	FilesTotal  int       `json:"files_total"`
	BytesRead   int64     `json:"bytes_read"`
	BytesTotal  int64     `json:"bytes_total"`
	Records     int64     `json:"records"`
	Percent     float64   `json:"percent"`
	StartedAt   time.Time `json:"started_at"`
	DurationSec float64   `json:"duration_seconds,omitempty"` // set once finished
	Retries     int64     `json:"download_retries,omitempty"` // source reads retried after an error
	// WaitingForBuilder is the address of the node this one waits for
	// to build the version before it copies its partitions from it
	// (build once), while it does.
	WaitingForBuilder string `json:"waiting_for_builder,omitempty"`
}

// HealStatus reports this node's healing of a version: the partitions of
// the active version it loads because they stayed below the target
// replication for heal_after (node/cluster's healing). It covers this process only: a
// restart forgets it (the partitions stay held).
type HealStatus struct {
	// Loading lists the partitions being loaded now, increasing.
	Loading []int `json:"loading,omitempty"`
	// Progress is the load under way, or the last one.
	Progress *BuildProgress `json:"progress,omitempty"`
	// Healed lists the partitions loaded for healing, increasing.
	Healed []int `json:"healed,omitempty"`
	// Loads counts the successful loads; each reads the source once for
	// up to heal_max_parallel partitions.
	Loads int `json:"loads"`
	// Failures counts partitions whose load failed; LastError is the
	// latest failure. A failed partition is tried again after heal_after.
	Failures  int    `json:"failures,omitempty"`
	LastError string `json:"last_error,omitempty"`
}

// clone returns a deep copy.
func (h *HealStatus) clone() *HealStatus {
	c := *h
	c.Loading = append([]int(nil), h.Loading...)
	c.Healed = append([]int(nil), h.Healed...)
	if h.Progress != nil {
		p := *h.Progress
		c.Progress = &p
	}
	return &c
}

// Status returns this node's view of every db. It is safe to call at any
// time; it takes each db's status lock briefly.
//
// In cluster mode it merges the View: each version lists every live node
// holding it, and the replica counters count them all against the
// cluster's Replication (Cluster.Status).
func (n *Node) Status() Status {
	st := Status{DBs: map[string]DBStatus{}, SourceError: n.SourceError(), Release: n.cfg.BinaryVersion, WatchError: n.WatchError(),
		HotCache: n.cache.status()}
	dbs := *n.dbs.Load()
	for db, p := range n.Pins() {
		if dbs[db] == nil {
			if st.OtherPins == nil {
				st.OtherPins = map[string]string{}
			}
			st.OtherPins[db] = p.String()
		}
	}
	if !n.clustered() {
		for name, d := range *n.dbs.Load() {
			st.DBs[name] = d.status(n.cfg.Name, 1)
		}
		return st
	}
	st.ShardID = n.shardID()
	for name, d := range *n.dbs.Load() {
		ds := d.status(n.Name(), n.cfg.Cluster.Replication())
		n.cfg.Cluster.Status(name, &ds)
		st.DBs[name] = ds
	}
	return st
}

// Name is this node's name in the status: Config.Name, or in cluster mode
// the name peers know it by, its advertised address (else its ID).
func (n *Node) Name() string {
	if n.clustered() {
		return StatusName(n.cfg.AdvertiseAddress, n.id)
	}
	return n.cfg.Name
}

// StatusName is the name a node goes by in the status: its advertised
// address, else its ID.
func StatusName(address, id string) string {
	if address != "" {
		return address
	}
	return id
}

// ShardID is this node's shard ID: Config.ShardID, else its ID.
func (n *Node) ShardID() string { return n.shardID() }

// Draining reports whether Drain has been called.
func (n *Node) Draining() bool { return n.draining.Load() }
