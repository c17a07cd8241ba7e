package node

import (
	"fmt"
	"slices"
	"time"

	"github.com/spangledb/spangle/blocks"
	"github.com/spangledb/spangle/node/assign"
)

// Cluster mode (Config.Cluster.Enabled), the first increment:
//
//  1. start-up waits until the live membership of the View has stayed the
//     same for TimeToConverge (converge) before the first listing;
//  2. a db builds only the partitions assigned to this node (assigned);
//  3. a built version is pending: held, advertised (Active false) and
//     readable by name, and becomes active once every partition has
//     MinReplication replicas cluster-wide (trySwitch), re-checked on every
//     View change (clusterLoop → db.nudge);
//  4. lookups of partitions held elsewhere are proxied (cluster_get.go);
//  5. the version replaced at a switch stays for peers naming it until
//     VersionRemoveTimeout passes without a request (retention.go);
//  6. Status merges the View's entries (cluster_status.go);
//  7. partitions of the active version that stay under-replicated for
//     HealAfter are loaded by the next nodes in rendezvous order (heal.go).
//
// Lock order: db.healMu and db.mu are never held together; the pending
// and active versions change only on the db's loop goroutine.

// clustered reports whether the node runs in cluster mode.
func (n *Node) clustered() bool { return n.cfg.Cluster.Enabled }

// cluster returns the View's current snapshot.
func (n *Node) cluster() *ClusterSnapshot {
	s, _ := n.cfg.Cluster.View.Cluster()
	if s == nil {
		return emptyCluster
	}
	return s
}

// converge blocks until the View is current, holds this node's entry, and
// its live membership has not changed for TimeToConverge. It returns false
// if the node shuts down first.
func (n *Node) converge() bool {
	ttc := n.cfg.Cluster.TimeToConverge
	n.log.Info("waiting for cluster membership to converge", "time_to_converge", ttc)
	t := time.NewTimer(ttc)
	defer t.Stop()
	last, good := "", false
	for {
		s, changed := n.cfg.Cluster.View.Cluster()
		if s == nil {
			s = emptyCluster
		}
		ok := !s.Stale() && s.hasNode(n.id)
		if m := s.membership(); m != last || ok != good {
			last, good = m, ok
			t.Reset(ttc)
		}
		select {
		case <-n.ctx.Done():
			return false
		case <-changed:
		case <-t.C:
			if good {
				n.log.Info("cluster membership converged", "nodes", len(s.Live()))
				return true
			}
			t.Reset(ttc)
		}
	}
}

// clusterLoop nudges every db at each change of the View, so that pending
// versions switch as soon as their replicas appear. It returns when the
// node shuts down.
func (n *Node) clusterLoop() {
	for {
		_, changed := n.cfg.Cluster.View.Cluster()
		select {
		case <-n.ctx.Done():
			return
		case <-changed:
		}
		for _, d := range *n.dbs.Load() {
			d.nudge()
			d.eachHeld(func(v *version) { n.routeFor(d, v) })
		}
	}
}

// eachHeld calls fn for the db's active, pending and retired versions.
func (d *db) eachHeld(fn func(*version)) {
	if v := d.active.Load(); v != nil {
		fn(v)
	}
	if v := d.pending.Load(); v != nil {
		fn(v)
	}
	if rs := d.retired.Load(); rs != nil {
		for _, r := range *rs {
			fn(r)
		}
	}
}

// nudge asks the db's loop to re-check its pending version. It does not
// block; nudges while one is pending merge.
func (d *db) nudge() {
	select {
	case d.nudgeCh <- struct{}{}:
	default:
	}
}

// assigned returns the partitions of version (n partitions) this node
// should build: the assignment over the live nodes' shard IDs plus its
// own, less those over MaxReplication elsewhere. Never nil.
func (d *db) assigned(version string, n int) []int {
	c := d.node.cfg.Cluster
	s := d.node.cluster()
	var ids []string
	for _, nd := range s.Live() {
		if nd.ShardID != "" {
			ids = append(ids, nd.ShardID)
		}
	}
	fn, _ := assign.ByName(c.Assignment) // checked by Validate
	ps := fn(ids, d.node.shardID(), n, c.Replication)
	remote := d.remoteReplicas(s, version, n)
	ps = assign.MaxReplicationFilter(ps, func(p int) int { return remote[p] }, c.Replication, c.MaxReplication)
	if ps == nil {
		ps = []int{}
	}
	return ps
}

// checkPartitioner refuses to build version when another node already
// advertises it built with a different partitioner: the two would place
// keys differently, and lookups routed by one would miss on the other.
func (d *db) checkPartitioner(s *ClusterSnapshot, version string) error {
	mine := d.partitioner.Identity()
	for _, h := range s.Holders(d.name, version) {
		if h.NodeID != d.node.id && h.Partitioner != "" && h.Partitioner != mine {
			return fmt.Errorf("%w: %s/%s: this node's partitioner is %s, but node %s built it with %s",
				ErrPartitionerMismatch, d.name, version, mine, h.NodeID, h.Partitioner)
		}
	}
	return nil
}

// remoteReplicas counts, per partition of version (n partitions), the
// other nodes that advertise it with this db's partitioner.
func (d *db) remoteReplicas(s *ClusterSnapshot, version string, n int) []int {
	counts := make([]int, n)
	d.remoteHoldings(s, version, n, d.partitioner.Identity(), func(_ string, p int) { counts[p]++ })
	return counts
}

// remoteHoldings calls fn for each partition p (0 ≤ p < n) of version that
// another node's partitions entry lists, for entries of n partitions built
// with partitioner identity.
func (d *db) remoteHoldings(s *ClusterSnapshot, version string, n int, identity string, fn func(node string, p int)) {
	for _, h := range s.Holders(d.name, version) {
		if h.NodeID == d.node.id || h.NumPartitions != n || h.Partitioner != identity {
			continue
		}
		for _, p := range h.Partitions {
			if p >= 0 && p < n {
				fn(h.NodeID, p)
			}
		}
	}
}

// setPending makes bv the db's pending version: readable by name and
// advertised, not yet answering unpinned lookups. A pending version it
// replaces is closed and removed. Called on the db's loop only.
func (d *db) setPending(state *versionState, bv *blocks.Version) {
	m := bv.Manifest()
	v := &version{
		name:        state.name,
		n:           m.NumPartitions,
		data:        bv,
		partitioner: d.partitioner,
		modified:    time.Now().Truncate(time.Second),
		state:       state,
	}
	d.mu.Lock()
	state.state = StateAvailable
	state.n = m.NumPartitions
	state.partitions = append([]int(nil), m.Partitions...)
	d.mu.Unlock()
	old := d.pending.Swap(v)
	d.node.heldChanged()
	d.node.log.Info("version available to peers", "db", d.name, "version", v.name, "partitions", m.Partitions)
	if old != nil {
		d.discard(old)
	}
}

// discard closes and removes a version that is no longer held: one that
// never became active, or a retired one. A heal load of it is stopped
// first.
func (d *db) discard(v *version) {
	d.stopHeal(v)
	if err := v.data.Close(); err != nil {
		d.node.log.Warn("closing version", "db", d.name, "version", v.name, "err", err)
	}
	d.node.removeVersionFiles(d.name, v.name)
	d.node.forgetRoutes(d.name, v.name)
	d.mu.Lock()
	delete(d.versions, v.name)
	d.mu.Unlock()
}

// trySwitch activates the pending version once every one of its
// partitions has MinReplication replicas, this node's and the View's; it
// discards a pending version not newer than the active one. Called on the
// db's loop only.
func (d *db) trySwitch() {
	p := d.pending.Load()
	if p == nil {
		return
	}
	pin := d.node.pinOf(d.name)
	pinned := !pin.IsZero() && p.name == d.pinTarget
	if !pin.IsZero() && !pinned || pin.IsZero() && d.manual() {
		// Built ahead: it waits for its activation (a pin naming it).
		return
	}
	if cur := d.active.Load(); cur != nil && p.name <= cur.name && !(pinned && p.name < cur.name) {
		d.pending.Store(nil)
		if p.name == cur.name && cur.state.damaged.Load() {
			// A repaired copy of the active version (repair.go): the
			// cluster switched to this version already.
			d.activateVersion(p)
			return
		}
		d.node.heldChanged()
		d.discard(p)
		return
	}
	if d.node.clustered() {
		counts := d.remoteReplicas(d.node.cluster(), p.name, p.n)
		for _, q := range p.data.Manifest().Partitions {
			counts[q]++
		}
		if i := slices.IndexFunc(counts, func(c int) bool { return c < d.node.cfg.Cluster.MinReplication }); i >= 0 {
			d.node.log.Debug("version not switched to yet: under-replicated", "db", d.name, "version", p.name,
				"partition", i, "replicas", counts[i], "min_replication", d.node.cfg.Cluster.MinReplication)
			return
		}
	}
	// Promote a copy: the pending one may be read concurrently.
	v := *p
	v.modified = time.Now().Truncate(time.Second)
	d.activateVersion(&v)
	d.pending.CompareAndSwap(p, nil)
	d.node.heldChanged()
}
