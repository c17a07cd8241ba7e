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
)

// Status is the node's view of every db, as served at "/". Field names follow
// sequins where sequins has them.
type Status struct {
	DBs     map[string]DBStatus `json:"dbs"`
	ShardID string              `json:"shard_id"`
}

// DBStatus is one db's versions, as served at "/<db>/".
type DBStatus struct {
	Versions map[string]VersionStatus `json:"versions"`
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
}

// Status returns this node's view of every db. It is safe to call at any
// time; it takes each db's status lock briefly.
//
// In cluster mode it merges the View: each version lists every live node
// holding it, and the replica counters count them all against
// ClusterConfig.Replication (cluster_status.go).
func (n *Node) Status() Status {
	st := Status{DBs: map[string]DBStatus{}}
	if !n.clustered() {
		for name, d := range *n.dbs.Load() {
			st.DBs[name] = d.status(n.cfg.Name, 1)
		}
		return st
	}
	st.ShardID = n.shardID()
	s, target := n.cluster(), n.cfg.Cluster.Replication
	for name, d := range *n.dbs.Load() {
		ds := d.status(n.Name(), target)
		n.mergeCluster(s, name, &ds, target)
		st.DBs[name] = ds
	}
	return st
}

// Name is this node's name in the status: Config.Name, or in cluster mode
// the name peers know it by, its advertised address (else its ID).
func (n *Node) Name() string {
	if n.clustered() {
		return statusName(n.cfg.AdvertiseAddress, n.id)
	}
	return n.cfg.Name
}
