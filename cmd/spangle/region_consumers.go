package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spangledb/spangle"
	"github.com/spangledb/spangle/kvwatch/natsconn"
	"github.com/spangledb/spangle/kvwatch/region"
)

// regionConsumers runs "spangle region-consumers --nats HUB --buckets B
// R…": at the hub, as a login of the cluster's account (its
// administrator), it makes the durable consumers the mirrors of each
// region R use with [region] hub_consumers (region.EnsureHubConsumers:
// one per region on the versions bucket and each Object Store bucket),
// or checks those there, and the bucket of regions where missing
// (region.EnsureRegionsBucket: regions may not create it). Run it once the buckets exist (after the first
// spangle publish) and for every new region; the regions' leafnode
// logins then need no consumer rights at the hub (docs/SECURITY.md).
func regionConsumers(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("region-consumers", "usage: spangle region-consumers --nats HUB [--creds FILE] [--cluster C] --buckets B,… REGION…", stderr)
	cf := addClientFlags(fs)
	buckets := fs.String("buckets", "", "the Object Store buckets the regions mirror, comma-separated")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if cf.natsURL == "" || fs.NArg() == 0 {
		fs.Usage()
		return usagef("region-consumers needs --nats (the hub) and the regions' names")
	}
	o := natsconn.Options{Name: "spangle-cli", Timeout: cf.timeout, CredsFile: cf.creds}
	nc, err := natsconn.Connect(cf.natsURL, o)
	if err != nil {
		return fmt.Errorf("connect %s: %w", cf.natsURL, err)
	}
	defer nc.Close()
	js, err := natsconn.JetStream(nc, natsconn.Options{})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cf.timeout)
	defer cancel()
	if err := region.EnsureRegionsBucket(ctx, js, cf.cluster); err != nil {
		return err
	}
	streams := region.MirroredStreams(cf.cluster, spangle.SplitList(*buckets))
	for _, r := range fs.Args() {
		created, err := region.EnsureHubConsumers(ctx, js, r, streams)
		for _, c := range created {
			fmt.Fprintf(stdout, "created %s for region %s\n", c, r)
		}
		if err != nil {
			return fmt.Errorf("region %s: %w", r, err)
		}
	}
	return nil
}
