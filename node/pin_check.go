package node

import (
	"context"
	"errors"
	"fmt"

	"github.com/spangledb/spangle/node/source"
)

// ErrPinOverridden is a pin of the node's own that cannot take effect: a
// pin of the cluster's for the same db wins over it.
var ErrPinOverridden = errors.New("node: the cluster's pin wins over the node's own")

// ErrNotPinned is an unpin of a db that has no pin of the node's own.
var ErrNotPinned = errors.New("node: nothing to unpin")

// CheckPin reports whether Pin(db, p) would take effect on this node,
// without changing anything: db must be a db the node serves
// (ErrUnknownDB); a pin must resolve among the versions its source lists
// now, or name a version held here (ErrPinnedVersionMissing), and no pin
// of the cluster's may hold the db (ErrPinOverridden); an unpin (a zero
// p) needs a pin of the node's own (ErrNotPinned). It lists the db's
// versions in the source, within ctx: a version counts once it is there,
// built here or not (the node builds it when pinned).
func (n *Node) CheckPin(ctx context.Context, db string, p Pin) error {
	if !source.ValidName(db) {
		return fmt.Errorf("%w: db name %q", ErrConfig, db)
	}
	if err := p.validate(); err != nil {
		return err
	}
	n.pinsMu.Lock()
	_, hasLocal := n.pins.Local[db]
	cluster, hasCluster := n.pins.Cluster[db]
	n.pinsMu.Unlock()
	if p.IsZero() {
		if !hasLocal {
			return fmt.Errorf("%w: %s has no pin of this node's own", ErrNotPinned, db)
		}
		return nil
	}
	dbs := n.dbs.Load()
	if dbs == nil || (*dbs)[db] == nil {
		return fmt.Errorf("%w: %s", ErrUnknownDB, db)
	}
	if hasCluster {
		return fmt.Errorf("%w: %s is pinned to %s for the cluster (spangle activate --latest %s removes it)", ErrPinOverridden, db, cluster, db)
	}
	versions, err := n.source.ListVersions(ctx, db, n.cfg.RequireSuccessFile)
	if err != nil {
		return fmt.Errorf("list the versions of %s: %w", db, err)
	}
	if _, err := p.resolve(versions); err != nil {
		if held, _ := (*dbs)[db].named(p.Version); p.Version != "" && held != nil {
			return nil // the source lost it, but it is held here
		}
		return fmt.Errorf("%w (%s has %s)", err, db, versionRange(versions))
	}
	return nil
}

// versionRange says which versions a listing holds, for the messages.
func versionRange(versions []string) string {
	switch len(versions) {
	case 0:
		return "no version"
	case 1:
		return "version " + versions[0]
	}
	return fmt.Sprintf("%d versions, %s to %s", len(versions), versions[0], versions[len(versions)-1])
}
