package node

import (
	"context"
	"errors"
	"fmt"

	"github.com/spangledb/spangle/blocks"
)

// byName returns the active, pending or retired version called name, or
// nil; naming a retired version restarts its retention timer.
func (d *db) byName(name string) *version {
	if v := d.active.Load(); v != nil && v.name == name {
		return v
	}
	if v := d.pending.Load(); v != nil && v.name == name {
		return v
	}
	return d.retiredByName(name)
}

// getCluster looks key up in v, reading the partitions held here and
// proxying the others to their replicas; for a pathological key whose own
// partition lacks it, the alternate partition is tried the same way.
func (n *Node) getCluster(ctx context.Context, d *db, v *version, key []byte, limit int) (Result, error) {
	res := Result{Version: v.name, Modified: v.lastModified()}
	if v.n == 0 {
		return res, nil // an empty version: every key is missing
	}
	p, alt, err := v.partitioner.Partition(key, v.n)
	if err != nil {
		return Result{}, fmt.Errorf("node: partition key: %w", err)
	}
	parts := []int{p}
	if alt != p {
		parts = append(parts, alt)
	}
	for _, q := range parts {
		if v.data.Holds(q) {
			val, err := v.data.GetLimit(q, key, limit)
			switch {
			case errors.Is(err, blocks.ErrNotFound):
				continue
			case err != nil:
				return Result{}, err
			}
			res.Value, res.Found = val, true
			return res, nil
		}
		r, err := n.cfg.Cluster.Get(ctx, d.info(v), q, key)
		if err != nil {
			return Result{}, err
		}
		if !r.Found {
			continue
		}
		res.Value, res.Found, res.ProxiedTo = r.Value, true, r.Peer
		return res, nil
	}
	return res, nil
}
