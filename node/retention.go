package node

import (
	"slices"
	"time"
)

// Old-version retention (cluster mode). When a db switches to a new
// version, the one it replaces is retired rather than removed: it stays
// open, held and advertised (Active false), readable by lookups naming it
// (GetOptions.Version, a peer's "?proxy=<old>"), and shows as REMOVING. It
// is closed and deleted once Cluster.Retention passes
// with no such lookup: each one stores its time in versionState.lastUsed
// (an atomic, written at most once a millisecond per version), and the
// db's loop keeps one timer for the earliest deadline, re-checking
// lastUsed when it fires. Outside cluster mode the old version is removed
// at once (activateVersion).
//
// The retired list is replaced, never modified, on the loop goroutine
// only; readers load it.

// retire returns retired with old, just replaced as active, added: kept
// for peers naming it, from now on. Called on the loop by
// activateVersion, which stores the list (set) and then arms the timer.
func (d *db) retire(old *version, retired []*version) []*version {
	old.state.lastUsed.Store(time.Now().UnixNano())
	d.node.log.Info("old version kept for peers naming it", "db", d.name, "version", old.name,
		"version_remove_timeout", d.node.cfg.Cluster.Retention())
	return append(slices.Clone(retired), old)
}

// retiredNamed returns the retired version called name, or nil. It does
// not block.
func (d *db) retiredNamed(name string) *version {
	rs := d.retired.Load()
	if rs == nil {
		return nil
	}
	for _, v := range *rs {
		if v.name == name {
			return v
		}
	}
	return nil
}

// used records a lookup naming the retired version s describes, for the
// retention timer: at most one store a millisecond.
func (s *versionState) used() {
	now := time.Now().UnixNano()
	if now-s.lastUsed.Load() >= int64(time.Millisecond) {
		s.lastUsed.Store(now)
	}
}

// armRetire sets the retention timer to the earliest deadline of the
// retired versions, or stops it if there are none. Called on the loop.
func (d *db) armRetire(now time.Time) {
	rs := d.retired.Load()
	if rs == nil || len(*rs) == 0 {
		d.retireTimer.stop()
		return
	}
	timeout := d.node.cfg.Cluster.Retention()
	next := time.Duration(-1)
	for _, v := range *rs {
		left := time.Unix(0, v.state.lastUsed.Load()).Add(timeout).Sub(now)
		if next < 0 || left < next {
			next = left
		}
	}
	d.retireTimer.arm(max(next, time.Millisecond))
}

// expireRetired removes the retired versions not asked for during the
// last VersionRemoveTimeout and re-arms the timer. Called on the loop.
func (d *db) expireRetired() {
	rs := d.retired.Load()
	if rs == nil {
		return
	}
	now := time.Now()
	timeout := d.node.cfg.Cluster.Retention()
	var keep, gone []*version
	for _, v := range *rs {
		if now.Sub(time.Unix(0, v.state.lastUsed.Load())) >= timeout {
			gone = append(gone, v)
		} else {
			keep = append(keep, v)
		}
	}
	if len(gone) > 0 {
		next := d.current()
		next.retired = keep
		d.set(next)
		for _, v := range gone {
			d.discard(v)
			d.node.log.Info("old version removed", "db", d.name, "version", v.name, "idle", timeout)
		}
	}
	d.armRetire(now)
}
