package node

// ActiveVersion returns the name of db's active version: the one a Get
// without GetOptions.Version reads at this moment. False when db is
// unknown or has no active version yet. It never blocks (two atomic
// loads) and is safe for concurrent use.
//
// A switch stores the new version before anything else sees it, so a
// lookup started after ActiveVersion returned a name reads that version
// or a later one; an answer cached under the name returned here is one
// a Get could have given now (the edge's hot cache relies on it).
func (n *Node) ActiveVersion(db string) (string, bool) {
	d := (*n.dbs.Load())[db]
	if d == nil {
		return "", false
	}
	v := d.active.Load()
	if v == nil {
		return "", false
	}
	return v.name, true
}
