package cluster

import (
	"slices"
	"strings"

	"github.com/spangledb/spangle/node/advert"
)

// View is the cluster state as this node sees it: the cluster package
// declares it so that it needs nothing of NATS; kvcluster.View implements
// it over kvwatch. Implementations must be safe for concurrent use.
type View interface {
	// Cluster returns the latest snapshot and a channel closed when a
	// newer one replaces it. It never blocks. The snapshot is shared and
	// must not be modified; it is never nil.
	Cluster() (*Snapshot, <-chan struct{})
}

// Snapshot is one immutable state of the cluster: the nodes'
// entries and their partitions entries, indexed. Build one with
// NewSnapshot; its methods are safe for concurrent use.
type Snapshot struct {
	nodes []advert.Node // by ID
	// Stale is true while the view may lag behind the cluster (NATS down,
	// or not caught up yet); start-up does not converge on a stale view.
	stale bool
	// holders maps "<db>.<version>" to the partitions entries of that
	// version, by node ID.
	holders map[string][]advert.Partitions
}

// NewSnapshot indexes the entries of the nodes and partitions
// buckets. It takes ownership of nodes and parts. A partitions entry of a
// node without a node entry is dropped: a dead node's entries linger
// until they expire, and a forged one names a node that does not exist.
func NewSnapshot(nodes []advert.Node, parts []advert.Partitions, stale bool) *Snapshot {
	slices.SortFunc(nodes, func(a, b advert.Node) int { return strings.Compare(a.ID, b.ID) })
	s := &Snapshot{nodes: nodes, stale: stale, holders: map[string][]advert.Partitions{}}
	for _, p := range parts {
		if n, ok := s.node(p.NodeID); !ok || !advert.SameRun(n, p) {
			continue
		}
		k := p.DB + "." + p.Version
		s.holders[k] = append(s.holders[k], p)
	}
	for _, ps := range s.holders {
		slices.SortFunc(ps, func(a, b advert.Partitions) int { return strings.Compare(a.NodeID, b.NodeID) })
	}
	return s
}

// Stale reports whether the snapshot may lag behind the cluster.
func (s *Snapshot) Stale() bool { return s.stale }

// Live returns the entries of the nodes that are not draining, by ID. The
// caller must not modify the result.
func (s *Snapshot) Live() []advert.Node {
	var out []advert.Node
	for _, n := range s.nodes {
		if n.State != advert.StateDraining {
			out = append(out, n)
		}
	}
	return out
}

// Holders returns the partitions entries of db's version, by node ID. The
// caller must not modify the result.
func (s *Snapshot) Holders(db, version string) []advert.Partitions {
	return s.holders[db+"."+version]
}

// membership is the part of a snapshot start-up waits to see stable:
// "<id>=<shard>" of the live nodes, sorted.
func (s *Snapshot) membership() string {
	var b strings.Builder
	for _, n := range s.Live() {
		b.WriteString(n.ID + "=" + n.ShardID + ",")
	}
	return b.String()
}

// hasNode reports whether node id has an entry.
func (s *Snapshot) hasNode(id string) bool {
	_, ok := s.node(id)
	return ok
}

// node returns the entry of node id.
func (s *Snapshot) node(id string) (advert.Node, bool) {
	i, ok := slices.BinarySearchFunc(s.nodes, id, func(n advert.Node, id string) int { return strings.Compare(n.ID, id) })
	if !ok {
		return advert.Node{}, false
	}
	return s.nodes[i], true
}

// emptySnapshot is the snapshot of a view that has seen nothing yet.
var emptySnapshot = NewSnapshot(nil, nil, true)
