package node

import (
	"context"
	"fmt"

	"github.com/spangledb/spangle/blocks"
)

// A peer copy gives up per partition, not per version: the partitions
// no peer holds, or whose copies all failed, are built from the source
// into the version that holds the copied ones (buildRest, heals alike),
// rather than every partition being built again.

// withHolder returns the partitions of parts that have a holder.
func withHolder(parts []int, holders map[int][]string) []int {
	var out []int
	for _, p := range parts {
		if len(holders[p]) > 0 {
			out = append(out, p)
		}
	}
	return out
}

// missing returns the partitions of parts bv does not hold.
func missing(bv *blocks.Version, parts []int) []int {
	var out []int
	for _, p := range parts {
		if !bv.Holds(p) {
			out = append(out, p)
		}
	}
	return out
}

// copySome copies from the peers the partitions of parts (of version
// name, n partitions) that the view says they hold, those they give
// (copyFrom, partial); nil, nil when none could be: the caller builds
// every partition from the source.
func (d *db) copySome(ctx context.Context, name string, n int, parts []int) (*blocks.Version, error) {
	bv, err := d.copyFrom(ctx, name, n, parts, nil, true)
	if err == errNoHolder {
		return nil, nil
	}
	return bv, err
}

// buildRest builds from the source into bv, a version copied from peers,
// the partitions of parts it lacks (none could be copied), and returns
// it. On failure bv is closed and removed, and the caller builds every
// partition from the source.
func (d *db) buildRest(ctx context.Context, spec blocks.BuildSpec, bv *blocks.Version, parts []int) (*blocks.Version, error) {
	rest := missing(bv, parts)
	if len(rest) == 0 {
		return bv, nil
	}
	nd := d.node
	nd.metrics.peerCopyRest.WithLabelValues(d.name).Add(float64(len(rest)))
	nd.log.Warn("peer copy: partitions no peer gave are built from the source", "db", d.name, "version", spec.Version,
		"partitions", rest, "copied", len(parts)-len(rest))
	spec.Partitions = rest
	if err := nd.store.AddPartitions(ctx, bv, spec); err != nil {
		_ = bv.Close()
		if rerr := nd.store.Remove(d.name, spec.Version); rerr != nil {
			nd.log.Warn("peer copy: removing the version whose other partitions failed to build", "db", d.name,
				"version", spec.Version, "err", rerr)
		}
		return nil, fmt.Errorf("building the partitions no peer gave: %w", err)
	}
	return bv, nil
}
