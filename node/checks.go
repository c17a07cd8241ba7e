package node

import (
	"errors"
	"strings"

	"github.com/spangledb/spangle/blocks"
)

// Activation checks: what a version must pass, once built (or reopened
// from disk) and before it may go active. They are one list,
// activationChecks; a new check (a guard, a digest) is one entry of it.
//
// A check fails in one of two ways:
//
//   - refusable (a guard: guards.go): the version is held but refused
//     (StateRefused, the reasons in its status and the node's partitions
//     entry): it does not go active, on this node nor, in cluster mode,
//     on any other (Cluster.MayActivate sees the refusal), until an
//     operator forces it (a pin with Force: spangle activate --force) or
//     a newer version replaces it;
//   - fatal (anything else the check returns): the version fails as a
//     failed build does (StateError, its files removed, retried later),
//     and nothing forces it.
//
// The checks run on the db's loop, in order; each sees the version
// (checkRun.data) and the active version it would replace (prev), and
// may share the merge diff of the two (checkRun.diff, computed once).

// activationCheck is one check of activationChecks.
type activationCheck struct {
	// name labels the check in reasons, logs and
	// spangle_version_refusals_total.
	name string
	// run returns nil when the version may go active, a refusal
	// (refusef) when it should wait for an operator, or another error
	// when it must not go active at all.
	run func(c *checkRun) error
}

// activationChecks are run in order on every version before it may go
// active.
var activationChecks = []activationCheck{
	// First: a version whose records are not those its _DIGEST states
	// fails, and no operator may force it (digest_check.go).
	{name: "digest", run: checkDigest},
	{name: "min_records", run: checkMinRecords},
	{name: "max_change", run: checkMaxChange},
	{name: "canary_keys", run: checkCanaries},
}

// checkRun is one version under the activation checks.
type checkRun struct {
	d    *db
	name string          // the version's
	data *blocks.Version // the version's data
	v    *version        // data as a version of the db (partitioner, n)
	prev *version        // the active version it would replace; nil at the first

	diffed  bool
	diff    *versionDiff
	diffErr error
}

// refusal is a check's refusal of a version: it waits for an operator.
type refusal struct{ reason string }

func (r *refusal) Error() string { return r.reason }

// refusef returns a refusal saying why.
func refusef(reason string) error { return &refusal{reason: reason} }

// maxRefusalLen bounds the reasons kept for a refused version (the status,
// the partitions entry).
const maxRefusalLen = 512

// checkVersion runs the activation checks on bv, version name of the db,
// against the active version. It returns the refusals, joined ("" when
// none refuses it), or the first fatal error. The diff the checks made,
// if any, is kept for the purge of the switch (changedKeys). Called on
// the loop.
func (d *db) checkVersion(name string, bv *blocks.Version) (refused string, err error) {
	c := &checkRun{d: d, name: name, data: bv, prev: d.active.Load()}
	c.v = d.newVersion(&versionState{name: name}, bv)
	if c.prev != nil && c.prev.name == name {
		c.prev = nil // a repaired copy of the active version: nothing to compare
	}
	var reasons []string
	for _, ch := range activationChecks {
		err := ch.run(c)
		var r *refusal
		switch {
		case err == nil:
		case errors.As(err, &r):
			reasons = append(reasons, ch.name+": "+r.reason)
			d.node.metrics.refusals.WithLabelValues(d.name, ch.name).Inc()
		default:
			return "", err
		}
	}
	if d.wantChangedKeys() && c.prev != nil && !c.diffed {
		// A delta built here over the version it replaces names its
		// changed keys itself (blocks.Version.DeltaKeys), and one that
		// changed more keys than are kept is purged whole: its counts
		// say so. Neither needs a diff.
		x, ok := c.deltaDiff()
		keys, kok := c.data.DeltaKeys()
		switch {
		case !ok:
			c.diffOnce()
		case x.added+x.removed+x.changed > int64(d.node.cfg.ChangedKeys):
		case kok && int64(len(keys)) == x.added+x.removed+x.changed:
			x.keys, x.complete = keys, true
			c.diff = x
		default:
			c.diffOnce()
		}
	}
	if c.diffErr != nil {
		c.diff = nil
	}
	d.keepChanges(name, c.diff)
	refused = strings.Join(reasons, "; ")
	if len(refused) > maxRefusalLen {
		refused = refused[:maxRefusalLen-3] + "..."
	}
	return refused, nil
}

// diffOnce computes the diff of the version against prev, once.
func (c *checkRun) diffOnce() (*versionDiff, error) {
	if !c.diffed {
		c.diffed = true
		c.d.diffs.Add(1)
		c.diff, c.diffErr = diffVersions(c.prev.name, c.prev.data, c.data, c.d.node.cfg.ChangedKeys)
	}
	return c.diff, c.diffErr
}

// runChecks runs the activation checks on bv, version state.name of the
// db, just built: a refusal is kept in state (the version is then held
// until forced or replaced); a fatal error closes and removes bv, and is
// returned. Called on the loop.
func (d *db) runChecks(state *versionState, bv *blocks.Version) error {
	refused, err := d.checkVersion(state.name, bv)
	if err != nil {
		bv.Close()
		d.node.removeVersionFiles(d.name, state.name)
		return err
	}
	if refused != "" {
		d.refuse(state, refused)
	}
	return nil
}

// refuse marks the version of state refused for reason: in its status,
// its partitions entry (Held: peers do not activate it either) and
// refused.json. Called on the loop.
func (d *db) refuse(state *versionState, reason string) {
	d.mu.Lock()
	state.refused = reason
	if state.state == StateAvailable {
		state.state = StateRefused
	}
	d.mu.Unlock()
	state.refusal.Store(&reason)
	d.node.keepRefusal(d.name, state.name, reason)
	d.node.heldChanged()
	d.node.log.Warn("version refused by its guards; the active version keeps serving until an operator forces it (spangle activate --force) or a newer version passes",
		"db", d.name, "version", state.name, "refused", reason)
}

// advertRefusal is what the partitions entry of the version of s says:
// why it is refused, "" when it is not or was forced.
func (s *versionState) advertRefusal() string {
	if r := s.refusal.Load(); r != nil {
		return *r
	}
	return ""
}

// refused reports whether the checks refused the version of state and no
// operator forced it.
func (d *db) refused(s *versionState) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return s.refused != "" && !s.forced
}
