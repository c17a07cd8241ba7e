package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/advert"
	"github.com/spangledb/spangle/node/proxy"
)

var _ node.RemoteLister = (*Cluster)(nil)

// RemoteVersion describes db's version as its other holders advertise it
// (partition count and partitioner, no partitions held here), for a
// listing whose cursor names a version this node no longer holds; false
// when no other live node holds it.
func (c *Cluster) RemoteVersion(db, version string) (node.VersionInfo, bool) {
	r := c.routeFor(db, version)
	self := c.n.ID()
	for _, h := range r.holders {
		if h.NodeID != self && h.Address != "" && h.NumPartitions > 0 {
			return node.VersionInfo{DB: db, Version: version, NumPartitions: h.NumPartitions, Partitioner: h.Partitioner}, true
		}
	}
	return node.VersionInfo{}, false
}

// ListRemote asks the holders of parts for a page of each: partitions
// with the same holders go in one request (with replication 1, one per
// node), sent to those holders with the proxy's staged backups, all
// requests at once. Holders are those of the current view, else, for a
// partition none of them lists, those missing from it for less than
// HealAfter (as Get). A partition no holder answered for fails the whole
// listing, naming the partitions: never a page without them.
func (c *Cluster) ListRemote(ctx context.Context, v node.VersionInfo, parts []int, req node.RemoteListRequest) ([]node.RemotePage, error) {
	r := c.routeFor(v.DB, v.Version)
	self := c.n.ID()
	holdersOf := func(p int, hs []advert.Partitions) []string {
		var peers []string
		for _, h := range hs {
			if h.NodeID == self || h.Address == "" || h.NumPartitions != v.NumPartitions || h.Partitioner != v.Partitioner {
				continue
			}
			if _, ok := slices.BinarySearch(h.Partitions, p); ok {
				peers = append(peers, h.Address)
			}
		}
		return peers
	}
	missing := make([]advert.Partitions, len(r.missing))
	for i, m := range r.missing {
		missing[i] = m.Partitions
	}
	// Group the partitions by their holders.
	type group struct {
		peers []string
		parts []int
	}
	var groups []*group
	byPeers := map[string]*group{}
	var none []int
	for _, p := range parts {
		peers := holdersOf(p, r.holders)
		if len(peers) == 0 {
			peers = holdersOf(p, missing)
		}
		if len(peers) == 0 {
			none = append(none, p)
			continue
		}
		slices.Sort(peers)
		key := strings.Join(peers, " ")
		g := byPeers[key]
		if g == nil {
			g = &group{peers: peers}
			byPeers[key] = g
			groups = append(groups, g)
		}
		g.parts = append(g.parts, p)
	}
	if len(none) > 0 {
		return nil, fmt.Errorf("%w: %s/%s partitions %v: no live node holds them", node.ErrNoReplica, v.DB, v.Version, none)
	}
	pages := make([]node.RemotePage, len(groups))
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for i, g := range groups {
		wg.Add(1)
		go func() { // owned: waited for below
			defer wg.Done()
			res, err := c.proxy.List(ctx, proxy.ListRequest{DB: v.DB, Version: v.Version, Partitions: g.parts,
				Start: req.Start, End: req.End, Limit: req.Limit, MaxBytes: req.MaxBytes, Values: req.Values, Peers: g.peers})
			if err != nil {
				errs[i] = err
				return
			}
			pages[i] = node.RemotePage{Partitions: g.parts, Keys: res.Page.Keys, Values: res.Page.Values, More: res.Page.More, Peer: res.Peer}
		}()
	}
	wg.Wait()
	var failed []int
	var timeout bool
	for i, err := range errs {
		if err == nil {
			continue
		}
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		failed = append(failed, groups[i].parts...)
		timeout = timeout || errors.Is(err, proxy.ErrTimeout)
	}
	if len(failed) > 0 {
		slices.Sort(failed)
		sentinel := node.ErrNoReplica
		if timeout {
			sentinel = node.ErrProxyTimeout
		}
		return nil, fmt.Errorf("%w: %s/%s: no page of partitions %v: %w", sentinel, v.DB, v.Version, failed, errors.Join(errs...))
	}
	return pages, nil
}
