package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/advert"
	"github.com/spangledb/spangle/node/proxy"
)

// route is what the node remembers of a version's holders: those of the
// cluster view it last looked at, and those that have gone missing from
// the view since, with when they went.
type route struct {
	view    *Snapshot
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
func (c *Cluster) routeFor(db, version string) *route {
	view := c.snapshot()
	key := db + "." + version
	old, _ := c.routes.Load(key)
	r, _ := old.(*route)
	if r != nil && r.view == view {
		return r
	}
	nr := &route{view: view, holders: view.Holders(db, version)}
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
			if gone(m.NodeID) && now.Sub(m.since) < c.cfg.HealAfter {
				nr.missing = append(nr.missing, m)
			}
		}
	}
	c.routes.Store(key, nr)
	return nr
}

// Forget drops the holders remembered for db's version, no longer held
// here.
func (c *Cluster) Forget(db, version string) { c.routes.Delete(db + "." + version) }

// Get looks key up in partition p of v on the nodes whose partitions
// entries list it: those of the current view, else, for HealAfter, those
// that went missing from it (a node whose entries expired during a NATS
// outage still serves).
func (c *Cluster) Get(ctx context.Context, v node.VersionInfo, p int, key []byte) (node.Remote, error) {
	r := c.routeFor(v.DB, v.Version)
	peers := make([]string, 0, len(r.holders)) // one allocation; the proxy copies it
	self := c.n.ID()
	add := func(h advert.Partitions) {
		if h.NodeID == self || h.Address == "" || h.NumPartitions != v.NumPartitions || h.Partitioner != v.Partitioner {
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
	res, err := c.proxy.Get(ctx, proxy.Request{DB: v.DB, Version: v.Version, Key: key, Peers: peers, Raw: true})
	switch {
	case err == nil:
		return node.Remote{Value: res.Body, Found: res.Status != http.StatusNotFound, Peer: res.Peer}, nil
	case errors.Is(err, proxy.ErrTimeout):
		return node.Remote{}, fmt.Errorf("%w: %s partition %d: %w", node.ErrProxyTimeout, v.DB, p, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return node.Remote{}, err
	}
	return node.Remote{}, fmt.Errorf("%w: %s partition %d: %w", node.ErrNoReplica, v.DB, p, err)
}
