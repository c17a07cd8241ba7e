package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/spangledb/spangle/blocks"
	"github.com/spangledb/spangle/kvwatch/names"
	"github.com/spangledb/spangle/node/source"
)

// Delta versions (docs/SOURCES.md): a version holding _BASE is built by
// merging its upserts (its data files) and deletions (_DELETES) into the
// partitions of its base, which this node holds already or builds first.
// A node that does not hold the base (a new node; a base it no longer
// keeps: a node keeps its active version, plus its retired ones for
// retention in cluster mode) follows the chain of bases down to the first
// version it holds or, failing that, to the newest full version of the
// chain, builds that one, applies each delta after it in turn, and keeps
// only the last: the bases it built on the way are removed.

// ErrDeltaBase: a delta version whose base cannot be had: missing from
// the source (a chain with a hole), or a chain too long.
var ErrDeltaBase = errors.New("delta base unavailable")

// maxDeltaChain bounds the deltas a node follows down to a version it
// holds or a full one.
const maxDeltaChain = 64

// maxBaseFile bounds the bytes read of a _BASE file.
const maxBaseFile = 1024

// readControl reads a version's file of metadata (_BASE, _DIGEST), at
// most limit bytes; ok is false when the version has none.
func (d *db) readControl(ctx context.Context, version, file string, limit int64) (_ []byte, ok bool, _ error) {
	rc, err := d.openControl(ctx, version, file, nil)
	if err != nil {
		if isNotFound(err) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("%s/%s/%s: %w", d.name, version, file, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, false, fmt.Errorf("%s/%s/%s: %w", d.name, version, file, err)
	}
	if int64(len(b)) > limit {
		return nil, false, fmt.Errorf("%w: %s/%s/%s: more than %d bytes", blocks.ErrBadInput, d.name, version, file, limit)
	}
	return b, true, nil
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// openControl opens a version's file that may be absent (an error
// isNotFound): at once, and if that fails otherwise, through the
// downloads, retried as a data file is.
func (d *db) openControl(ctx context.Context, version, file string, retries *atomic.Int64) (io.ReadCloser, error) {
	n := d.node
	rc, err := n.source.Open(ctx, d.name, version, file)
	if err == nil || isNotFound(err) {
		return rc, err
	}
	if retries == nil {
		retries = new(atomic.Int64)
	}
	return n.dl.Open(ctx, n.source, d.name, version, source.SourceFile{Name: file, Size: -1}, retries)
}

// baseOf returns the base version named by version's _BASE; "" for a
// full version.
func (d *db) baseOf(ctx context.Context, version string) (string, error) {
	b, ok, err := d.readControl(ctx, version, blocks.BaseFileName, maxBaseFile)
	if err != nil || !ok {
		return "", err
	}
	base := strings.TrimSpace(string(b))
	if !names.Valid(base) || base >= version {
		return "", fmt.Errorf("%w: %s/%s/%s names %q: want the name of an older version", blocks.ErrBadInput, d.name, version, blocks.BaseFileName, base)
	}
	return base, nil
}

// deltaPlan is how to get a delta version's base here.
type deltaPlan struct {
	n int // the version's partitions: its chain's
	// from is the held version the chain starts from; nil: steps[0], a
	// full version, is built first.
	from *version
	// steps are the versions to build in order, each over the one
	// before (or from); the last is the delta itself.
	steps []string
}

// heldNamed returns this node's version called name: active, pending or
// retired; nil if none.
func (d *db) heldNamed(name string) *version {
	cur := d.current()
	for _, v := range append([]*version{cur.active, cur.pending}, cur.retired...) {
		if v != nil && v.name == name {
			return v
		}
	}
	return nil
}

// planDelta follows version name's chain of bases, from base, down to a
// version held here or a full one.
func (d *db) planDelta(ctx context.Context, name, base string) (*deltaPlan, error) {
	steps := []string{name}
	var listed []string
	for cur := base; ; {
		if len(steps) > maxDeltaChain {
			return nil, fmt.Errorf("%w: %s/%s: more than %d deltas down to a full version or one held here", ErrDeltaBase, d.name, name, maxDeltaChain)
		}
		if v := d.heldNamed(cur); v != nil {
			slices.Reverse(steps)
			return &deltaPlan{n: v.n, from: v, steps: steps}, nil
		}
		if listed == nil {
			var err error
			if listed, err = d.node.source.ListVersions(ctx, d.name, d.node.cfg.RequireSuccessFile); err != nil {
				return nil, err
			}
		}
		if _, ok := slices.BinarySearch(listed, cur); !ok {
			return nil, fmt.Errorf("%w: %s/%s: its base %s is not in the source, nor held here", ErrDeltaBase, d.name, steps[len(steps)-1], cur)
		}
		steps = append(steps, cur)
		next, err := d.baseOf(ctx, cur)
		if err != nil {
			return nil, err
		}
		if next == "" {
			files, err := d.node.source.ListFiles(ctx, d.name, cur)
			if err != nil {
				return nil, err
			}
			slices.Reverse(steps)
			return &deltaPlan{n: len(files), steps: steps}, nil
		}
		cur = next
	}
}

// prepareBase returns the base to build the plan's last step over,
// holding parts: the held version, or the chain built up to it. release
// closes and removes the bases built here.
func (d *db) prepareBase(ctx context.Context, plan *deltaPlan, parts []int, retries *atomic.Int64) (*blocks.Version, func(), error) {
	n := d.node
	var cur *blocks.Version
	release := func() {}
	if plan.from != nil {
		cur = plan.from.data
		for _, p := range parts {
			if !cur.Holds(p) {
				return nil, release, fmt.Errorf("%w: %s/%s: the base %s held here lacks partition %d, assigned to this node since",
					ErrDeltaBase, d.name, plan.steps[len(plan.steps)-1], plan.from.name, p)
			}
		}
	}
	last := plan.steps[len(plan.steps)-1]
	for i, step := range plan.steps[:len(plan.steps)-1] {
		spec, _, err := d.buildSpec(ctx, step, retries)
		if err == nil && cur != nil {
			spec.Base = cur
			spec.Deletes, err = d.deletesOf(ctx, step, retries)
		}
		if err != nil {
			release()
			return nil, func() {}, err
		}
		spec.Partitions = parts
		_ = n.store.Remove(d.name, step) // not held: files left by an earlier try
		n.log.Info("building a base of a delta", "db", d.name, "version", step, "for", last)
		bv, err := n.store.Build(ctx, spec)
		release()
		if err == nil {
			// Each step against its own _DIGEST (checkDigestOf says why
			// the last one's is not enough).
			if err = d.checkDigestOf(ctx, step, bv); err != nil {
				bv.Close()
				_ = n.store.Remove(d.name, step)
			}
		}
		if err != nil {
			return nil, func() {}, fmt.Errorf("base %s (step %d of %d of the chain %s): %w", step, i+1, len(plan.steps), plan, err)
		}
		if spec.Base != nil {
			n.metrics.deltaBuilds.WithLabelValues(d.name).Inc()
		}
		cur = bv
		release = func() {
			bv.Close()
			if err := n.store.Remove(d.name, step); err != nil {
				n.log.Warn("removing a base built for a delta", "db", d.name, "version", step, "err", err)
			}
		}
	}
	return cur, release, nil
}

// String names the plan's versions in build order, "v1 → v2 → v3", the
// held version it starts from first; a chain of more than six, its first
// three and last three.
func (plan *deltaPlan) String() string {
	steps := plan.steps
	if plan.from != nil {
		steps = append([]string{plan.from.name + " (held)"}, steps...)
	}
	if len(steps) > 6 {
		steps = slices.Concat(steps[:3], []string{fmt.Sprintf("(%d more)", len(steps)-6)}, steps[len(steps)-3:])
	}
	return strings.Join(steps, " → ")
}

// deletesOf returns version's _DELETES file as a build's input; none if it
// has no such file.
func (d *db) deletesOf(ctx context.Context, version string, retries *atomic.Int64) ([]blocks.SourceFile, error) {
	n := d.node
	rc, err := d.openControl(ctx, version, blocks.DeletesFileName, retries)
	if err != nil {
		if isNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("%s/%s/%s: %w", d.name, version, blocks.DeletesFileName, err)
	}
	rc.Close()
	f := source.SourceFile{Name: blocks.DeletesFileName, Size: -1}
	return []blocks.SourceFile{{Name: f.Name, Size: -1, Open: func(ctx context.Context) (io.ReadCloser, error) {
		return n.dl.Open(ctx, n.source, d.name, version, f, retries)
	}}}, nil
}

// deltaPlanOf returns how to get version name's base, nil for a full
// version.
func (d *db) deltaPlanOf(ctx context.Context, name string) (*deltaPlan, error) {
	base, err := d.baseOf(ctx, name)
	if err != nil || base == "" {
		return nil, err
	}
	return d.planDelta(ctx, name, base)
}

// buildFromSource builds spec's version, over its base (prepared first)
// when plan is not nil.
func (d *db) buildFromSource(ctx context.Context, spec blocks.BuildSpec, plan *deltaPlan, parts []int, retries *atomic.Int64) (*blocks.Version, error) {
	if plan == nil {
		return d.node.store.Build(ctx, spec)
	}
	base, release, err := d.prepareBase(ctx, plan, parts, retries)
	defer release()
	if err != nil {
		return nil, err
	}
	spec.Base = base
	spec.Partitions = parts
	if spec.Deletes, err = d.deletesOf(ctx, spec.Version, retries); err != nil {
		return nil, err
	}
	bv, err := d.node.store.Build(ctx, spec)
	if err == nil {
		d.node.metrics.deltaBuilds.WithLabelValues(d.name).Inc()
	}
	return bv, err
}

// checkDeltaSpace refuses a delta that cannot fit on the data dir's disk:
// its partitions take about what the base's (held here) take, and the
// delta's records. checkSpace counts only the delta's files. A base not
// held (a chain to build) is not estimated: its build checks nothing
// more than a full build would.
func (d *db) checkDeltaSpace(plan *deltaPlan, parts []int, delta int64) error {
	if plan == nil || plan.from == nil {
		return nil
	}
	var base int64
	m := plan.from.data.Manifest()
	for _, pi := range m.PartitionInfo {
		if slices.Contains(parts, pi.Partition) {
			base += pi.StoredBytes
		}
	}
	need := base + base/10 + 2*delta + 1<<20
	free, err := blocks.FreeBytes(d.node.cfg.DataDir)
	if err != nil || free >= need {
		return nil
	}
	return fmt.Errorf("%w: the delta over %s needs about %d MiB, %d MiB are free on the data dir's disk", blocks.ErrNoSpace, plan.from.name, need>>20, free>>20)
}
