package kvwatch

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spangledb/spangle/internal/backoff"
	"github.com/spangledb/spangle/kvwatch/region"
)

// checkDomain checks, in a region, that the JetStream the connection
// reaches has the region's domain; it retries until ctx ends, as Start
// does for the buckets, and a wrong domain is an error at once.
func (k *KV) checkDomain(ctx context.Context, nc *nats.Conn) error {
	pause := backoff.New(50*time.Millisecond, time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, k.cfg.OpTimeout)
		err := region.CheckDomain(cctx, nc, k.cfg.Region.Name)
		cancel()
		if err == nil || errors.Is(err, region.ErrInvalidConfig) {
			return err
		}
		if !pause.Wait(ctx) {
			return err
		}
	}
}

// watchHub checks that the hub's JetStream answers through the region's
// server, at Start and then every Region.HubCheckInterval, until ctx
// ends, and when it does announces the region in the hub's bucket of
// regions (region.Announce, living announceTTL). After a failure it
// looks again sooner: 1 s, doubling up to the interval, with jitter. It logs each change (an
// error while the hub is unreachable, naming what to check; an
// announcement refused) and keeps the hub_connected gauge. Nothing else
// depends on it: the region serves from its mirrors either way.
func (k *KV) watchHub(ctx context.Context, nc *nats.Conn) {
	var leafs func() int
	if k.cfg.Embedded() {
		leafs = func() int {
			if s := k.emb.srv.Load(); s != nil {
				return s.NumLeafNodes()
			}
			return 0
		}
	}
	up := -1         // unknown
	announced := "-" // the last announcement's error ("" none, "-" not tried): logged once
	interval := k.cfg.Region.HubCheckInterval
	retry := backoff.New(min(time.Second, interval), interval) // the waits after a failure
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
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
		if err == nil {
			cctx, cancel := context.WithTimeout(ctx, k.cfg.Region.HubCheckTimeout)
			aerr := region.Announce(cctx, nc, k.cfg.Region, k.cfg.ClusterName, k.cfg.announceTTL())
			cancel()
			if ctx.Err() != nil {
				return
			}
			msg := ""
			if aerr != nil {
				msg = aerr.Error()
			}
			if msg != announced && aerr != nil {
				k.log.Warn("region: the hub did not take this region's announcement; spangle status --regions at the hub lists the region only when named (check the region's login at the hub: docs/SECURITY.md, Regions)",
					"region", k.cfg.Region.Name, "err", aerr)
			}
			announced = msg
			err = aerr
		}
		// While the hub does not answer (the link is coming up at start,
		// say), or has not taken the announcement, look again sooner, so
		// that the region is known at the hub soon after the link is.
		if err == nil {
			retry.Reset()
			t.Reset(interval)
		} else {
			t.Reset(retry.Next())
		}
	}
}

// announceTTL is how long the region's entry in the hub's bucket of
// regions lives: three hub checks, in whole seconds, at least 1 s.
func (c Config) announceTTL() time.Duration {
	return max(time.Second, (3 * c.Region.HubCheckInterval).Round(time.Second))
}
