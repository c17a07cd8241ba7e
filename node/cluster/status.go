package cluster

import (
	"slices"

	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/advert"
)

// Status merging (cluster mode). A node's status shows, per version of a
// db that this node knows (built, building, failed or active here), every
// live node holding it as the View sees it, besides itself:
// name (advertised address, else ID), state, partitions and shard ID from
// its partitions entry; the replication counters are then computed over
// all of them. A peer's state is ACTIVE for the version it answers
// unpinned lookups from, REMOVING for one older than that (kept for peers
// naming it, retention.go), REFUSED for one its guards refuse there,
// AVAILABLE for one newer (built, waiting for min_replication). Peers' created_at and active_at are not in their
// entries and stay unset. Nothing is asked of the peers: the merge reads
// the View's snapshot only.

// Status adds to ds, this node's status of db, the other live
// nodes' entries in the view and recounts the replicas against Replication.
func (c *Cluster) Status(db string, ds *node.DBStatus) {
	s, target, n := c.snapshot(), c.cfg.Replication, c.n
	live := map[string]advert.Node{}
	for _, nd := range s.Live() {
		live[nd.ID] = nd
	}
	self := n.Name()
	for v, vs := range ds.Versions {
		if nv, ok := vs.Nodes[self]; ok {
			nv.ShardID = n.ShardID()
			vs.Nodes[self] = nv
			ds.Versions[v] = vs
		}
	}
	// The other live nodes' entries for db, by version, and the version
	// each answers unpinned lookups from.
	prefix := db + "."
	byVersion := map[string][]advert.Partitions{}
	activeOf := map[string]string{}
	// Only the versions this node knows, so that the status costs what
	// this node holds, whatever the buckets hold; and only the entries
	// that agree with this node on the version's partition count.
	for v, vs := range ds.Versions {
		for _, h := range s.holders[prefix+v] {
			if _, ok := live[h.NodeID]; !ok || h.NodeID == n.ID() || (vs.NumPartitions > 0 && h.NumPartitions != vs.NumPartitions) {
				continue
			}
			byVersion[h.Version] = append(byVersion[h.Version], h)
			if h.Active {
				activeOf[h.NodeID] = h.Version
			}
		}
	}
	for v, hs := range byVersion {
		vs, ok := ds.Versions[v]
		if !ok {
			vs = node.VersionStatus{NumPartitions: hs[0].NumPartitions, Partitioner: hs[0].Partitioner,
				Nodes: map[string]node.NodeVersionStatus{}}
		}
		for _, h := range hs {
			state := node.StateAvailable
			switch a := activeOf[h.NodeID]; {
			case h.Active:
				state = node.StateActive
			case a != "" && v < a:
				state = node.StateRemoving
			case h.Refused != "":
				state = node.StateRefused
			}
			addr := h.Address
			if addr == "" {
				addr = live[h.NodeID].Address
			}
			shard := h.ShardID
			if shard == "" {
				shard = live[h.NodeID].ShardID
			}
			name := node.StatusName(addr, h.NodeID)
			vs.Nodes[name] = node.NodeVersionStatus{
				Name:       name,
				Current:    h.Active,
				State:      state,
				Partitions: slices.Clone(h.Partitions),
				ShardID:    shard,
				Refused:    h.Refused,
			}
		}
		ds.Versions[v] = vs
	}
	for v, vs := range ds.Versions {
		held := map[string][]int{}
		for name, nv := range vs.Nodes {
			switch nv.State {
			case node.StateActive, node.StateAvailable, node.StateRemoving, node.StateRefused:
				held[name] = nv.Partitions
			}
		}
		vs.MissingPartitions, vs.UnderreplicatedPartitions, vs.OverreplicatedPartitions = 0, 0, 0
		vs.AverageReplication = 0
		vs.CountReplicas(held, target)
		ds.Versions[v] = vs
	}
}
