package node

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spangledb/spangle/blocks"
)

// Guards: the refusable activation checks of a db's config
// ([dbs.<name>] min_records, max_change, canary_keys, canary_values).
// A version that fails one is refused (checks.go). Each node checks what
// it holds: the records of its partitions, the canaries in its
// partitions, the change of its partitions against the same partitions
// of the version replaced; in cluster mode a version goes active only
// when every partition has its replicas and none of its holders refuses
// it (Cluster.MayActivate), so that every partition's canaries and
// change are checked by some holder. min_records is checked against the
// version's records as the holders' partitions entries add them up
// (Cluster.VersionRecords); by a node alone, against its manifest.

// checkMinRecords refuses a version with fewer than MinRecords records.
func checkMinRecords(c *checkRun) error {
	min := c.d.cfg.MinRecords
	if min <= 0 {
		return nil
	}
	m := c.data.Manifest()
	if c.d.node.clustered() && len(m.Partitions) < m.NumPartitions {
		return nil // the whole version's count is known once replicated: refuseClusterRecords
	}
	if m.Records < min {
		return refusef(fmt.Sprintf("%d records, fewer than min_records %d", m.Records, min))
	}
	return nil
}

// checkMaxChange refuses a version whose keys differ from the active
// version's by more than MaxChange: keys added, removed or given another
// value, over the active version's keys.
func checkMaxChange(c *checkRun) error {
	max := c.d.cfg.MaxChange
	if max <= 0 || c.prev == nil {
		return nil
	}
	x, ok := c.deltaDiff()
	if !ok {
		var err error
		if x, err = c.diffOnce(); err != nil {
			return fmt.Errorf("node: max_change: compare with version %s: %w", c.prev.name, err)
		}
	}
	if x.compared == 0 {
		return nil // no partition held by both here: other holders compare
	}
	if f := x.fraction(); f > max {
		return refusef(fmt.Sprintf("%.4g of the keys changed against version %s (%d added, %d removed, %d changed of %d), more than max_change %g",
			f, c.prev.name, x.added, x.removed, x.changed, x.base, max))
	}
	return nil
}

// checkCanaries refuses a version that lacks a canary key, or holds one
// with another value than canary_values says. A canary in partitions not
// held here is left to their holders.
func checkCanaries(c *checkRun) error {
	cfg := c.d.cfg
	if len(cfg.CanaryKeys) == 0 && len(cfg.CanaryValues) == 0 {
		return nil
	}
	var bad []string
	check := func(key string, want *string) error {
		parts, n, err := c.v.keyPartitions([]byte(key))
		if err != nil {
			return err
		}
		held, found, same := false, false, false
	parts:
		for _, p := range parts[:n] {
			if !c.data.Holds(p) {
				continue
			}
			held = true
			limit := -1
			if want != nil {
				limit = len(*want)
			}
			v, err := c.data.GetLimit(p, []byte(key), limit)
			switch {
			case errors.Is(err, blocks.ErrNotFound):
				continue
			case errors.Is(err, blocks.ErrTooLarge):
				found = true
			case err != nil:
				return fmt.Errorf("node: canary key %q: %w", key, err)
			default:
				found = true
				same = want == nil || bytes.Equal(v, []byte(*want))
			}
			break parts
		}
		switch {
		case !held:
		case !found:
			bad = append(bad, fmt.Sprintf("%q is missing", clip(key)))
		case !same:
			bad = append(bad, fmt.Sprintf("%q has another value", clip(key)))
		}
		return nil
	}
	for _, k := range cfg.CanaryKeys {
		if err := check(k, nil); err != nil {
			return err
		}
	}
	keys := make([]string, 0, len(cfg.CanaryValues))
	for k := range cfg.CanaryValues {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		want := cfg.CanaryValues[k]
		if err := check(k, &want); err != nil {
			return err
		}
	}
	if len(bad) > 0 {
		return refusef("canary key " + strings.Join(bad, ", "))
	}
	return nil
}

// clip shortens a key for a message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:61] + "..."
	}
	return s
}

// refuseClusterRecords checks min_records in cluster mode, once every
// partition of p has a holder: the version's records are the sum, over
// its partitions, of what their holders' partitions entries say
// (Cluster.VersionRecords). It refuses p, and reports true, when they
// are fewer than min_records; until every partition's count is known it
// checks nothing. Called on the loop.
func (d *db) refuseClusterRecords(p *version, info VersionInfo) bool {
	min := d.cfg.MinRecords
	if min <= 0 || len(info.Partitions) == info.NumPartitions {
		return false // none, or checked here with the rest (checkMinRecords)
	}
	total, ok := d.node.cfg.Cluster.VersionRecords(info)
	if !ok {
		// Not every partition's holder is known yet (or one, of an older
		// release, does not publish its records).
		d.node.log.Debug("min_records not checked yet: a partition's records are unknown", "db", d.name, "version", p.name)
		return false
	}
	if total >= min {
		return false
	}
	d.node.metrics.refusals.WithLabelValues(d.name, "min_records").Inc()
	d.refuse(p.state, fmt.Sprintf("min_records: %d records, fewer than min_records %d", total, min))
	return true
}

// deltaDiff is the counts of a delta version built over prev here, from
// its manifest (blocks.DeltaInfo: what the delta's merge counted), so
// that max_change costs no diff; false for any other version.
func (c *checkRun) deltaDiff() (*versionDiff, bool) {
	m, pm := c.data.Manifest(), c.prev.data.Manifest()
	if m.Delta == nil || m.Delta.Base != c.prev.name || !slices.Equal(m.Partitions, pm.Partitions) {
		return nil, false
	}
	return &versionDiff{from: c.prev.name, compared: len(m.Partitions), base: pm.Records,
		added: m.Delta.Added, removed: m.Delta.Deleted, changed: m.Delta.Changed}, true
}
