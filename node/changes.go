package node

// Changed keys of a switch, for the purge hooks: the merge diff of the
// activation checks (checks.go, guards_diff.go) lists the keys a version
// added, removed or changed against the active version it replaces, and
// the db keeps the list of its newest checked version, so that the
// purge of the switch (edge.Purger) can purge those keys only, the
// caches keeping every other one (their values, and so their ETags, are
// the same).

// Changes is what a version changed against the version it replaced, in
// the partitions this node holds of it.
type Changes struct {
	// From is the version compared with: the active one when the version
	// was checked.
	From string
	// Keys are the keys added, removed or given another value, in key
	// order per partition: every one of the partitions held here (in
	// cluster mode the holders of the version cover them all between
	// them). None are kept for a switch that changed more than
	// Config.ChangedKeys keys here, or of which this node did not hold
	// every partition in the version replaced.
	Keys [][]byte
}

// changes is a db's kept Changes: of version name.
type changes struct {
	name string
	Changes
}

// wantChangedKeys reports whether the db keeps the changed keys of its
// versions (Config.ChangedKeys).
func (d *db) wantChangedKeys() bool { return d.node.cfg.ChangedKeys > 0 }

// keepChanges keeps x, the diff of version name (nil: none made), if it
// lists every changed key. Called on the loop.
func (d *db) keepChanges(name string, x *versionDiff) {
	var c *changes
	if d.wantChangedKeys() && x != nil && x.complete && !x.overflow {
		c = &changes{name: name, Changes: Changes{From: x.from, Keys: x.keys}}
	}
	d.mu.Lock()
	d.changes = c
	d.mu.Unlock()
}

// ChangedKeys returns what version changed of db against the version it
// replaced, in the partitions held here, when this node kept it
// (Config.ChangedKeys): false when it did not (no diff, more keys
// changed than kept, a partition held here not compared, or another
// version checked since). The caller must not
// modify the keys.
func (n *Node) ChangedKeys(db, version string) (Changes, bool) {
	dbs := n.dbs.Load()
	if dbs == nil {
		return Changes{}, false
	}
	d := (*dbs)[db]
	if d == nil {
		return Changes{}, false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.changes == nil || d.changes.name != version {
		return Changes{}, false
	}
	return d.changes.Changes, true
}
