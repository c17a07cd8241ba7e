package node

import (
	"fmt"
	"maps"
	"time"
)

// A db that a listing of the source lacks keeps serving: an unmounted mount
// point, an rsync target mid-sync, an Object Store bucket re-created empty
// (a region's mirror among them) list no dbs, and none of them means "delete
// what we serve". The db is marked missing (logged, shown in the status as
// missing_from_source_since, spangle_db_missing_from_source_seconds) and
// removed only once it has stayed missing for Config.RemoveMissingAfter, or
// when an operator asks (RemoveDB, DELETE /admin/dbs/<db>). A db that
// holds no version (none built yet, every build failed) has nothing to
// lose: it goes at once, as before. A failed listing changes nothing.

// missingFor returns since when d has been missing from the source's
// listings, and whether it is.
func (d *db) missingFor() (time.Time, bool) {
	ns := d.missingSince.Load()
	if ns == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}

// holdsVersion reports whether d holds a version: active, pending or
// retired.
func (d *db) holdsVersion() bool {
	cur := d.current()
	return cur.active != nil || cur.pending != nil || len(cur.retired) > 0
}

// keepMissing decides for d, a db that a successful listing of the source
// lacks, whether it stays: it marks d missing (since now) the first time,
// and answers false once RemoveMissingAfter has passed since, or at once
// when d holds no version. Called by refresh.
func (n *Node) keepMissing(d *db, now time.Time) bool {
	if !d.holdsVersion() {
		n.log.Info("db is gone from the source and serves nothing; removing it", "db", d.name)
		return false
	}
	since, missing := d.missingFor()
	if !missing {
		d.missingSince.Store(now.UnixNano())
		n.log.Warn("db is missing from the source; it keeps serving", "db", d.name, "source", n.source.String(),
			"removed", n.removalNote(now))
		return true
	}
	if grace := n.cfg.RemoveMissingAfter; grace >= 0 && now.Sub(since) >= grace {
		n.log.Warn("db has been missing from the source for remove_missing_after; removing it", "db", d.name,
			"missing_since", since, "remove_missing_after", grace)
		return false
	}
	return true
}

// removalNote says when a db missing since now is removed, for the log.
func (n *Node) removalNote(now time.Time) string {
	if n.cfg.RemoveMissingAfter < 0 {
		return "only by an operator (DELETE /admin/dbs/<db>)"
	}
	return fmt.Sprintf("after remove_missing_after (%v, at %s) unless it comes back, or by an operator (DELETE /admin/dbs/<db>)",
		n.cfg.RemoveMissingAfter, now.Add(n.cfg.RemoveMissingAfter).UTC().Format(time.RFC3339))
}

// listedAgain clears d's missing mark: a listing holds it again.
func (n *Node) listedAgain(d *db) {
	if since, missing := d.missingFor(); missing {
		d.missingSince.Store(0)
		n.log.Info("db is back in the source", "db", d.name, "missing_for", time.Since(since).Round(time.Second))
	}
}

// nextRemoval is when the earliest missing db of dbs is due for removal;
// zero if none is (none missing, or RemoveMissingAfter negative).
func (n *Node) nextRemoval(dbs map[string]*db) time.Time {
	if n.cfg.RemoveMissingAfter < 0 {
		return time.Time{}
	}
	var next time.Time
	for _, d := range dbs {
		if since, missing := d.missingFor(); missing {
			at := since.Add(n.cfg.RemoveMissingAfter)
			if next.IsZero() || at.Before(next) {
				next = at
			}
		}
	}
	return next
}

// RemoveDB removes db now, an operator's act: its versions stop serving
// and its files are deleted. Only a db missing from the source's last
// successful listing can be removed (ErrDBInSource otherwise: it would
// come back at the next listing); ErrUnknownDB if the node has no such db.
func (n *Node) RemoveDB(name string) error {
	n.dbsMu.Lock()
	defer n.dbsMu.Unlock()
	old := *n.dbs.Load()
	d, ok := old[name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownDB, name)
	}
	if _, missing := d.missingFor(); !missing {
		return fmt.Errorf("%w: %q is in the source's last listing: delete it there first", ErrDBInSource, name)
	}
	dbs := maps.Clone(old)
	delete(dbs, name)
	n.dbs.Store(&dbs)
	n.log.Warn("db removed by an operator", "db", name)
	n.dropDB(d, "operator")
	n.heldChanged()
	return nil
}

// dropDB stops d, which has left the read path (n.dbs), and deletes its
// data; why is the removals counter's label.
func (n *Node) dropDB(d *db, why string) {
	d.shutdown()
	if err := n.store.RemoveDB(d.name); err != nil {
		n.log.Warn("cannot remove db data", "db", d.name, "err", err)
	}
	n.metrics.forgetDB(d.name)
	n.metrics.removed.WithLabelValues(why).Inc()
}

// HasDB reports whether the node has db: listed by its source, or
// missing from it but not yet removed. The front doors forget what they
// keep for a db once it is false (edge). Safe for concurrent use.
func (n *Node) HasDB(db string) bool {
	_, ok := (*n.dbs.Load())[db]
	return ok
}
