package node

import (
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
	d := c.d
	b, ok, err := d.readControl(d.ctx, c.name, blocks.DigestFileName, 64<<20)
	if err != nil {
		return err
	}
	if !ok {
		d.node.metrics.digestChecks.WithLabelValues(d.name, "absent").Inc()
		return nil
	}
	vd, err := blocks.ReadVersionDigest(bytesReader(b))
	if err == nil {
		err = vd.Check(c.data.Manifest())
	}
	if err != nil {
		d.node.metrics.digestChecks.WithLabelValues(d.name, "mismatch").Inc()
		return fmt.Errorf("%s/%s: %w", d.name, c.name, err)
	}
	d.node.metrics.digestChecks.WithLabelValues(d.name, "ok").Inc()
	return nil
}

// isNotFound reports whether a source's error says the file is absent.
func isNotFound(err error) bool { return errors.Is(err, fs.ErrNotExist) }
