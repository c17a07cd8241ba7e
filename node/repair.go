package node

// Damaged versions. blocks verifies a version's files against its
// manifest when it opens one, so a version damaged on disk while the node
// was down is removed and rebuilt at start (reuseLocalVersions). Damage
// that appears later, while the version serves, shows as a lookup error
// wrapping blocks.ErrCorrupt (bbolt's panics included): the db then
// rebuilds the same version from the source while the damaged copy keeps
// answering what it can (its files are unlinked first; the open mapping
// stays valid), and switches to the fresh copy. Lookups that meet damaged
// pages meanwhile get an error (500), never a wrong answer from a page
// bbolt rejects, and the process never crashes.

// corrupted reports that a lookup in v met damaged data. The first report
// for a version logs and counts it, marks it in the status and asks the
// db loop to repair it; later ones do nothing.
func (d *db) corrupted(v *version, err error) {
	if !v.state.damaged.CompareAndSwap(false, true) {
		return
	}
	d.node.metrics.corrupt.WithLabelValues(d.name, "serving").Inc()
	d.node.log.Error("damaged data while serving; rebuilding the version", "db", d.name, "version", v.name, "err", err)
	d.mu.Lock()
	v.state.err = "damaged on disk, rebuilding: " + err.Error()
	d.mu.Unlock()
	d.requestRepair(v)
}

// requestRepair queues v for repair on the db loop.
func (d *db) requestRepair(v *version) {
	select {
	case d.repairCh <- v:
	default: // one is queued; the loop takes the active version
	}
}

// repair rebuilds the damaged active version under its own name and
// switches to the new copy (activateVersion, trySwitch). A failed rebuild
// leaves the damaged copy serving and is tried again after
// RetryFailedAfter. Runs on the db loop.
func (d *db) repair(v *version) {
	if d.active.Load() != v || d.ctx.Err() != nil {
		return // replaced meanwhile, or shutting down
	}
	n := d.node
	log := n.log.With("db", d.name, "version", v.name)
	// POSIX: the open files stay readable once unlinked.
	if err := n.store.Remove(d.name, v.name); err != nil {
		log.Error("cannot remove the damaged version's files", "err", err)
		d.retryRepair(v)
		return
	}
	if err := d.build(v.name); err != nil {
		if d.ctx.Err() != nil {
			return
		}
		log.Error("rebuilding the damaged version failed; it keeps serving what it can", "err", err)
		d.mu.Lock()
		v.state.err = "damaged on disk; rebuilding failed: " + err.Error()
		d.versions[v.name] = v.state
		d.mu.Unlock()
		d.retryRepair(v)
	}
}

// retryRepair repairs v again after RetryFailedAfter (never when that is
// not positive: a SIGHUP does not repair either), on the loop's repair
// timer. Called on the loop.
func (d *db) retryRepair(v *version) {
	if after := d.node.cfg.RetryFailedAfter; after > 0 {
		d.repairRetry = v
		d.repairTimer.arm(after)
	}
}
