package node

import (
	"slices"
	"time"

	"github.com/spangledb/spangle/blocks"
)

// A db's versions and their transitions.
//
// A db has at most one active version (unpinned lookups read it), at most
// one pending version (built, held and readable by name, waiting for its
// activation: pending.go) and, in cluster mode, retired versions (replaced
// as active, kept for peers naming them: retention.go). Lookups load them
// from atomic pointers without a lock (read.go). They change only through
// set, on the db's loop goroutine (and before it starts, when the node
// reuses the versions on disk), which publishes the node's held versions
// (Held) after each change; at shutdown closeVersions clears them and the
// node publishes once for all dbs.
//
// The transitions, each one call of set:
//
//   - setPending (pending.go): a built version becomes pending, replacing
//     (and discarding) the one there;
//   - dropPending (pending.go): the pending version is discarded;
//   - activateVersion: a version becomes active, from a build, from
//     pending or from retired (reactivate); the one it replaces is
//     retired in cluster mode, discarded alone, closed when it is a
//     damaged copy of the same version (repair.go);
//   - expireRetired (retention.go): retired versions past their retention
//     are discarded.

// versions is one state of a db's versions. retired is never modified
// once set: a change makes a new list.
type versions struct {
	active, pending *version
	retired         []*version
}

// current returns the db's versions.
func (d *db) current() versions {
	vs := versions{active: d.active.Load(), pending: d.pending.Load()}
	if rs := d.retired.Load(); rs != nil {
		vs.retired = *rs
	}
	return vs
}

// set makes next the db's versions and publishes them (Node.heldChanged).
// A version that moves (from pending or retired to active, from active to
// retired) stays readable by name (named) throughout: when the retired
// list changes, it first holds both the old and the new retired
// versions, then active and pending are stored, then the retired list as
// next has it. Called on the db's loop only.
func (d *db) set(next versions) {
	prev := d.current()
	cur := prev.retired
	if !slices.Equal(cur, next.retired) {
		both := slices.Clone(next.retired)
		for _, v := range cur {
			if !slices.Contains(both, v) {
				both = append(both, v)
			}
		}
		d.retired.Store(&both)
	}
	d.active.Store(next.active)
	d.pending.Store(next.pending)
	retired := next.retired
	d.retired.Store(&retired)
	from, to, changed := d.carried(prev, next)
	d.node.cache.dropCarrying(prev.leaving(next), from, to, changed)
	d.node.heldChanged() // the NATS front door and the advertiser follow (held.go)
}

// carried returns the switch from prev's active version to next's whose
// cached answers of unchanged keys are carried over (cache.go,
// dropCarrying) and the keys it changed: when the db kept them
// (Config.ChangedKeys, a switch changing at most that many) against the
// version it replaces, and the node is not in a cluster (a proxied
// answer's partition is not in this node's diff, nor a partition it
// held in one version and not the other). Otherwise nil: the answers are
// dropped. After a switch changing 1 % of the keys, carrying kept 72.8 %
// of the next 10k Zipf lookups hits against 48.5 % (BenchmarkCacheSwitch).
func (d *db) carried(prev, next versions) (from, to *version, changed [][]byte) {
	if d.node.clustered() || prev.active == nil || next.active == nil || prev.active == next.active {
		return nil, nil, nil
	}
	d.mu.Lock()
	c := d.changes
	d.mu.Unlock()
	if c == nil || c.name != next.active.name || c.From != prev.active.name {
		return nil, nil, nil
	}
	return prev.active, next.active, c.Keys
}

// leaving returns the versions of vs whose cached answers (cache.go) go
// with next: those that leave the active and pending places (a version
// retired keeps answering peers that name it, rarely: its answers are
// cached again if asked for) and those next no longer holds. Versions
// are compared as pointers: a copy of a version is another.
func (vs versions) leaving(next versions) []*version {
	var gone []*version
	for _, v := range append([]*version{vs.active, vs.pending}, vs.retired...) {
		if v != nil && v != next.active && v != next.pending && !slices.Contains(gone, v) &&
			(v == vs.active || v == vs.pending || !slices.Contains(next.retired, v)) {
			gone = append(gone, v)
		}
	}
	return gone
}

// activate switches lookups to bv, just built, then retires the previous
// version: lookups that still hold it finish (Close waits for them) or
// retry on the new one, so no request fails or sees an older version.
func (d *db) activate(state *versionState, bv *blocks.Version) {
	d.activateVersion(d.newVersion(state, bv))
}

// newVersion is bv, just built or opened, as a version of the db whose
// status is state; its modified time is now.
func (d *db) newVersion(state *versionState, bv *blocks.Version) *version {
	return &version{
		name:        state.name,
		n:           bv.Manifest().NumPartitions,
		data:        bv,
		partitioner: d.partitioner,
		modified:    time.Now().Truncate(time.Second),
		state:       state,
	}
}

// activateVersion switches lookups to v (see activate); v.modified is
// when it becomes active. A pending or retired version of v's name
// leaves those places (v is it, or a copy of it). The version v replaces
// is retired in cluster mode and discarded alone; a damaged copy of v's
// own version (repair.go) is closed, its files being gone already.
func (d *db) activateVersion(v *version) {
	state := v.state
	m := v.data.Manifest()
	now := v.modified
	cur := d.current()
	old := cur.active
	d.mu.Lock()
	forced := state.refused != ""
	state.state = StateActive
	state.activeAt = now
	state.n = m.NumPartitions
	state.partitions = append([]int(nil), m.Partitions...)
	if old != nil && old.name != v.name {
		// Before the switch, so that a status showing v active never
		// shows the version it replaces active too.
		old.state.state = StateRemoving
	}
	d.mu.Unlock()
	if forced {
		d.node.keepRefusal(d.name, v.name, "") // refused.go: active now, whatever its guards said
	}

	next := versions{active: v, pending: cur.pending}
	if next.pending != nil && next.pending.name == v.name {
		next.pending = nil
	}
	// A pending version older than v (one its guards refused: checks.go)
	// will never go active: discarded once v is.
	var stale *version
	if next.pending != nil && next.pending.name < v.name {
		stale, next.pending = next.pending, nil
	}
	discardStale := func() {
		if stale != nil {
			d.discard(stale)
		}
	}
	next.retired = slices.DeleteFunc(slices.Clone(cur.retired), func(r *version) bool { return r.name == v.name })
	if old != nil && old.name == v.name {
		// A repaired copy of a damaged version (repair.go): the damaged
		// one's files are gone already; its lookups finish, or retry here.
		d.set(next)
		discardStale()
		d.node.metrics.activeVersion(d.name, v.name, v.data)
		d.node.log.Info("repaired version active", "db", d.name, "version", v.name)
		d.stopHeal(old)
		if err := old.data.Close(); err != nil {
			d.node.log.Warn("closing damaged version", "db", d.name, "version", old.name, "err", err)
		}
		return
	}
	clustered := d.node.clustered()
	if old != nil && clustered {
		next.retired = d.retire(old, next.retired) // it stays held and advertised
	}
	d.set(next)
	discardStale()
	if old != nil && clustered {
		d.armRetire(time.Now())
	}
	d.node.metrics.activeVersion(d.name, v.name, v.data)
	d.node.log.Info("version active", "db", d.name, "version", v.name)
	if old == nil {
		return
	}
	if !clustered {
		d.discard(old)
		d.node.log.Info("old version removed", "db", d.name, "version", old.name)
	}
	d.mu.Lock()
	// Failed versions older than the active one will never be built: drop them.
	for name, s := range d.versions {
		if name < v.name && s.state == StateError {
			delete(d.versions, name)
			delete(d.failed, name)
		}
	}
	d.mu.Unlock()
}

// reactivate switches to the retired version called name, if this node
// kept it, and reports whether it did. Called on the loop.
func (d *db) reactivate(name, why string) bool {
	v := d.retiredNamed(name)
	if v == nil {
		return false
	}
	d.node.log.Info(why, "db", d.name, "version", name)
	nv := *v
	nv.modified = time.Now().Truncate(time.Second)
	d.activateVersion(&nv)
	return true
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
	if v.state.refused != "" {
		d.node.keepRefusal(d.name, v.name, "")
	}
	if d.node.clustered() {
		d.node.cfg.Cluster.Forget(d.name, v.name)
	}
	d.mu.Lock()
	delete(d.versions, v.name)
	d.mu.Unlock()
}

// closeVersions closes the db's versions at shutdown, once its loop has
// returned; lookups that race with it see ErrUnknownDB or ErrNoVersion
// afterwards. Their files stay. The node publishes the held versions
// afterwards.
func (d *db) closeVersions() {
	var closed []*version
	if rs := d.retired.Swap(nil); rs != nil {
		closed = append(closed, *rs...)
	}
	if v := d.pending.Swap(nil); v != nil {
		closed = append(closed, v)
	}
	if v := d.active.Swap(nil); v != nil {
		closed = append(closed, v)
	}
	d.node.cache.drop(closed...)
	for _, v := range closed {
		v.data.Close()
	}
}
