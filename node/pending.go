package node

import (
	"fmt"
	"time"

	"github.com/spangledb/spangle/blocks"
)

// Pending versions. A version built but not yet active is pending: held,
// advertised (Active false) and readable by name, not answering unpinned
// lookups. Three things make a build pending rather than active at once:
// cluster mode (it waits until Cluster.MayActivate says every partition
// has enough replicas), a db with Activation "manual" (it waits for an
// activation, a pin naming it: pin.go), and a pin on the db (the pinned
// version goes active; another one waits). trySwitch decides, on the
// db's loop, after each build, at each change of the cluster (nudge) and
// of the pin. A db has at most one pending version; a newer build
// replaces it.

// nudge asks the db's loop to re-check its pending version. It does not
// block; nudges while one is pending merge.
func (d *db) nudge() {
	select {
	case d.nudgeCh <- struct{}{}:
	default:
	}
}

// setPending makes bv the db's pending version: readable by name and
// advertised, not yet answering unpinned lookups. A pending version it
// replaces is closed and removed. Called on the db's loop only (or
// before it starts).
func (d *db) setPending(state *versionState, bv *blocks.Version) {
	m := bv.Manifest()
	v := d.newVersion(state, bv)
	d.mu.Lock()
	state.state = StateAvailable
	if state.refused != "" {
		state.state = StateRefused
	}
	state.n = m.NumPartitions
	state.partitions = append([]int(nil), m.Partitions...)
	d.mu.Unlock()
	next := d.current()
	old := next.pending
	next.pending = v
	d.set(next)
	d.node.log.Info("version available to peers", "db", d.name, "version", v.name, "partitions", m.Partitions)
	if old != nil {
		d.discard(old)
	}
}

// dropPending closes and removes the pending version p, which is no
// longer wanted. Called on the db's loop only.
func (d *db) dropPending(p *version) {
	next := d.current()
	if next.pending != p {
		return
	}
	next.pending = nil
	d.set(next)
	d.discard(p)
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
		if p.name == cur.name && cur.state.damaged.Load() {
			// A repaired copy of the active version (repair.go): the
			// cluster switched to this version already.
			d.activateVersion(p)
			return
		}
		d.dropPending(p)
		return
	}
	forced := pinned && pin.Force
	if d.refused(p.state) && !forced {
		if pinned {
			d.setPinResult(pin, p.name, d.pinRefusal(pin, p.name))
		}
		return // it waits for an operator, or a newer version
	}
	info := d.info(p)
	info.Forced = forced
	if d.node.clustered() {
		// min_records first: every node refuses a version with too few,
		// not only the first to count them (the others would wait on
		// its refusal without showing their own).
		if !forced && d.refuseClusterRecords(p, info) { // guards.go
			return
		}
		if !d.node.cfg.Cluster.MayActivate(info) {
			return // under-replicated, or refused by a holder: asked again at the next change
		}
	}
	if forced {
		d.mu.Lock()
		if p.state.refused != "" {
			p.state.forced = true
			d.node.log.Warn("activating a refused version, as an operator forced it", "db", d.name, "version", p.name, "refused", p.state.refused)
		}
		d.mu.Unlock()
		p.state.refusal.Store(nil)
	}
	// Promote a copy: the pending one may be read concurrently. It
	// leaves the pending place as it becomes active.
	v := *p
	v.modified = time.Now().Truncate(time.Second)
	d.activateVersion(&v)
}

// pinRefusal is why pin, resolved to version name, cannot be followed
// when name is the pending version and its guards refused it (the pin
// not forcing it); "" otherwise.
func (d *db) pinRefusal(pin Pin, name string) string {
	p := d.pending.Load()
	if p == nil || p.name != name || pin.Force || !d.refused(p.state) {
		return ""
	}
	d.mu.Lock()
	why := p.state.refused
	d.mu.Unlock()
	return fmt.Sprintf("version %s is refused by its guards (%s): spangle activate --force activates it", name, why)
}
