package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/spangledb/spangle/blocks"
	"github.com/spangledb/spangle/node/advert"
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

// route is what the node remembers of a version's holders: those of the
// cluster view it last looked at, and those that have gone missing from
// the view since, with when they went.
type route struct {
	view    *ClusterSnapshot
	holders []advert.Partitions
	missing []missingHolder
}

type missingHolder struct {
	advert.Partitions
	since time.Time
}

// routeFor returns the route of v in the current cluster view. Holders
// that leave the view are kept for heal_after as a last resort: entries
// vanish for a moment when a NATS outage outlasts their TTL, and until
// their nodes write them again those nodes still serve.
func (n *Node) routeFor(d *db, v *version) *route {
	view := n.cluster()
	key := d.name + "." + v.name
	old, _ := n.routes.Load(key)
	r, _ := old.(*route)
	if r != nil && r.view == view {
		return r
	}
	nr := &route{view: view, holders: view.Holders(d.name, v.name)}
	if r != nil {
		now := time.Now()
		gone := func(id string) bool {
			return !slices.ContainsFunc(nr.holders, func(h advert.Partitions) bool { return h.NodeID == id })
		}
		for _, h := range r.holders {
			if gone(h.NodeID) {
				nr.missing = append(nr.missing, missingHolder{h, now})
			}
		}
		for _, m := range r.missing {
			if gone(m.NodeID) && now.Sub(m.since) < n.cfg.Cluster.HealAfter {
				nr.missing = append(nr.missing, m)
			}
		}
	}
	n.routes.Store(key, nr)
	return nr
}

// forgetRoutes drops the route of a version this node no longer holds.
func (n *Node) forgetRoutes(db, version string) { n.routes.Delete(db + "." + version) }

// proxyGet asks the replicas of partition p of v for key, as stored (the
// caller decodes). Errors are ErrProxyTimeout, ErrNoReplica or ctx's.
func (n *Node) proxyGet(ctx context.Context, d *db, v *version, p int, key []byte) (proxy.Response, error) {
	r := n.routeFor(d, v)
	peers := make([]string, 0, len(r.holders)) // one allocation; the proxy copies it
	identity := v.data.Manifest().Partitioner
	add := func(h advert.Partitions) {
		if h.NodeID == n.id || h.Address == "" || h.NumPartitions != v.n || h.Partitioner != identity {
			return
		}
		if _, ok := slices.BinarySearch(h.Partitions, p); ok {
			peers = append(peers, h.Address)
		}
	}
	for _, h := range r.holders {
		add(h)
	}
	if len(peers) == 0 {
		for _, m := range r.missing {
			add(m.Partitions)
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
