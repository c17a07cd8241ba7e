package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/spangledb/spangle/blocks"
	"github.com/spangledb/spangle/node/proxy"
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
func (n *Node) getCluster(ctx context.Context, d *db, v *version, key []byte) (Result, error) {
	res := Result{Version: v.name, Modified: v.modified}
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
			val, err := v.data.Get(q, key)
			switch {
			case errors.Is(err, blocks.ErrNotFound):
				continue
			case err != nil:
				return Result{}, err
			}
			res.Value, res.Found = val, true
			return res, nil
		}
		pr, err := n.proxyGet(ctx, d, v, q, key)
		if err != nil {
			return Result{}, err
		}
		if pr.Status == http.StatusNotFound {
			continue
		}
		res.Value, res.Found, res.ProxiedTo = pr.Body, true, pr.Peer
		return res, nil
	}
	return res, nil
}

// proxyGet asks the replicas of partition p of v for key, as stored (the
// caller decodes). Errors are ErrProxyTimeout, ErrNoReplica or ctx's.
func (n *Node) proxyGet(ctx context.Context, d *db, v *version, p int, key []byte) (proxy.Response, error) {
	holders := n.cluster().Holders(d.name, v.name)
	peers := make([]string, 0, len(holders)) // one allocation; the proxy copies it
	identity := v.data.Manifest().Partitioner
	for _, h := range holders {
		if h.NodeID == n.id || h.Address == "" || h.NumPartitions != v.n || h.Partitioner != identity {
			continue
		}
		if _, ok := slices.BinarySearch(h.Partitions, p); ok {
			peers = append(peers, h.Address)
		}
	}
	res, err := n.proxy.Get(ctx, proxy.Request{DB: d.name, Version: v.name, Key: key, Peers: peers, Raw: true})
	switch {
	case err == nil:
		return res, nil
	case errors.Is(err, proxy.ErrTimeout):
		return proxy.Response{}, fmt.Errorf("%w: %s partition %d: %w", ErrProxyTimeout, d.name, p, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return proxy.Response{}, err
	}
	return proxy.Response{}, fmt.Errorf("%w: %s partition %d: %w", ErrNoReplica, d.name, p, err)
}
