package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/spangledb/spangle/blocks"
)

// checkDigest compares the partitions built (or copied) here with the
// version's _DIGEST, when it has one (blocks.VersionDigest): a mismatch,
// or a _DIGEST that cannot be read, is fatal (the version fails as a
// failed build does, and nothing forces it).
func checkDigest(c *checkRun) error {
	return c.d.checkDigestOf(c.d.ctx, c.name, c.data)
}

// checkDigestOf compares bv, version name of the db, with that version's
// _DIGEST: the activation check of a version, and of each base of a
// chain built here on the way to a delta (prepareBase). The last
// version's digest vouches for its own records only: it cannot say which
// step of a chain went wrong, and a last version without _DIGEST (it is
// optional) vouches for nothing, so a base this node failed as a version
// of its own would otherwise be built on unchecked when it is a step of
// the chain to the next one. Each step is checked as it is built, and
// the first that does not match fails the delta, naming it.
func (d *db) checkDigestOf(ctx context.Context, name string, bv *blocks.Version) error {
	b, ok, err := d.readControl(ctx, name, blocks.DigestFileName, 64<<20)
	if err != nil {
		return err
	}
	if !ok {
		d.node.metrics.digestChecks.WithLabelValues(d.name, "absent").Inc()
		return nil
	}
	vd, err := blocks.ReadVersionDigest(bytesReader(b))
	if err == nil {
		err = vd.Check(bv.Manifest())
	}
	if err != nil {
		d.node.metrics.digestChecks.WithLabelValues(d.name, "mismatch").Inc()
		return fmt.Errorf("%s/%s: %w", d.name, name, err)
	}
	d.node.metrics.digestChecks.WithLabelValues(d.name, "ok").Inc()
	return nil
}

// isNotFound reports whether a source's error says the file is absent.
func isNotFound(err error) bool { return errors.Is(err, fs.ErrNotExist) }
