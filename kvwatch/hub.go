package kvwatch

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spangledb/spangle/kvwatch/region"
)

// checkDomain checks, in a region, that the JetStream the connection
// reaches has the region's domain; it retries until ctx ends, as Start
// does for the buckets, and a wrong domain is an error at once.
func (k *KV) checkDomain(ctx context.Context, nc *nats.Conn) error {
	wait := 50 * time.Millisecond
	for {
		cctx, cancel := context.WithTimeout(ctx, k.cfg.OpTimeout)
		err := region.CheckDomain(cctx, nc, k.cfg.Region.Name)
		cancel()
		if err == nil || errors.Is(err, region.ErrInvalidConfig) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, time.Second)
	}
}

// watchHub checks that the hub's JetStream answers through the region's
// server, at Start and then every Region.HubCheckInterval, until ctx
// ends. It logs each change (an error while the hub is unreachable,
// naming what to check) and keeps the hub_connected gauge. Nothing else
// depends on it: the region serves from its mirrors either way.
func (k *KV) watchHub(ctx context.Context) {
	var leafs func() int
	if k.cfg.Embedded() {
		leafs = func() int {
			if s := k.emb.srv.Load(); s != nil {
				return s.NumLeafNodes()
			}
			return 0
		}
	}
	up := -1 // unknown
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		k.mu.Lock()
		nc := k.nc
		k.mu.Unlock()
		cctx, cancel := context.WithTimeout(ctx, k.cfg.Region.HubCheckTimeout)
		err := region.CheckHub(cctx, nc, k.cfg.Region, leafs)
		cancel()
		if ctx.Err() != nil {
			return
		}
		switch {
		case err != nil && up != 0:
			k.log.Error("region: the hub does not answer; serving what the region's mirrors hold", "region", k.cfg.Region.Name, "err", err)
			up = 0
		case err == nil && up != 1:
			k.log.Info("region: the hub answers", "region", k.cfg.Region.Name, "hub_domain", k.cfg.Region.HubDomain)
			up = 1
		}
		k.met.hubConnected.Set(float64(up))
		t.Reset(k.cfg.Region.HubCheckInterval)
	}
}
