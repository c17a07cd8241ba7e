package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/edge/client"
	"github.com/spangledb/spangle/kvwatch/names"
	"github.com/spangledb/spangle/kvwatch/natsconn"
	"github.com/spangledb/spangle/kvwatch/region"
	"github.com/spangledb/spangle/node/advert"
)

// regionStatus is one region as `spangle status --regions` shows it.
type regionStatus struct {
	Region string `json:"region"`
	// Reachable: the region answered through the leafnode.
	Reachable bool `json:"reachable"`
	// Connected: the region's mirror of the hub's versions bucket heard
	// from the hub within region.ActiveWithin, without error, as the
	// region reports it. Pending is what that mirror has yet to receive.
	Connected bool   `json:"connected"`
	Pending   uint64 `json:"pending"`
	// Nodes are the region's live nodes; Active the versions they serve
	// unpinned lookups from, by db (one each when the region agrees).
	Nodes  []advert.Node       `json:"nodes"`
	Active map[string][]string `json:"active"`
	// Pins are the region's own pins (advert.RegionPinKey), by db.
	Pins  map[string]advert.Pin `json:"pins,omitempty"`
	Error string                `json:"error,omitempty"`
}

// regionsStatus prints the regions of the hub at cf.natsURL: those named
// (names), those whose nodes announce them in the hub's bucket of
// regions (region.Announce: alive and connected within three hub
// checks), and those a region pin names. It asks each region through the
// leafnode, read-only, under "$JS.<region>.API": the state of its mirror
// of the versions bucket, then its nodes and partitions buckets. Nothing
// is written anywhere, no entry of a region is copied out of it, and a
// region that is cut off simply does not answer.
func regionsStatus(ctx context.Context, cf *clientFlags, wanted []string, stdout io.Writer, asJSON bool) error {
	if cf.natsURL == "" {
		return errors.New("--regions needs --nats: the hub's URL")
	}
	o := natsconn.Options{Name: "spangle-cli", Timeout: cf.timeout, CredsFile: cf.creds}
	nc, err := natsconn.Connect(cf.natsURL, o)
	if err != nil {
		return fmt.Errorf("connect %s: %w", cf.natsURL, err)
	}
	defer nc.Close()
	js, err := natsconn.ToolJetStream(nc, o)
	if err != nil {
		return err
	}
	bucket := names.KVBucket(cf.cluster, names.Versions)
	byName := map[string]*regionStatus{}
	get := func(name string) *regionStatus {
		r := byName[name]
		if r == nil {
			r = &regionStatus{Region: name, Active: map[string][]string{}, Pins: map[string]advert.Pin{}}
			byName[name] = r
		}
		return r
	}
	for _, n := range wanted {
		if !names.Valid(n) {
			return fmt.Errorf("bad region name %q", n)
		}
		get(n)
	}
	announced, err := region.Regions(ctx, js, cf.cluster)
	if err != nil {
		return err
	}
	for _, n := range announced {
		get(n)
	}
	if err := regionPins(ctx, js, bucket, get); err != nil {
		return err
	}
	var wg sync.WaitGroup
	for _, r := range byName {
		wg.Go(func() { readRegion(ctx, nc, cf, names.KVStream(bucket), r) })
	}
	wg.Wait()
	regions := make([]*regionStatus, 0, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		regions = append(regions, byName[name])
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(regions)
	}
	printRegions(stdout, regions)
	return nil
}

// regionPins reads the region pins of the hub's versions bucket, with
// a batched direct get (region.LastEntries: no consumer, which an
// operator's account at a hub with accounts may not create).
func regionPins(ctx context.Context, js jetstream.JetStream, bucket string, get func(string) *regionStatus) error {
	entries, err := region.LastEntries(ctx, js, bucket, "*"+names.PinSuffix+".*")
	if err != nil {
		return fmt.Errorf("versions bucket %s: %w", bucket, err)
	}
	for key, value := range entries {
		_, name, ok := advert.ParsePinKey(key)
		if !ok || name == "" {
			continue
		}
		if p, err := advert.DecodePin(key, value); err == nil {
			get(name).Pins[p.DB] = p
		}
	}
	return nil
}

// readRegion asks region r, through the hub, for the state of its mirror
// of stream and for its cluster map, until ctx ends.
func readRegion(ctx context.Context, nc *nats.Conn, cf *clientFlags, stream string, r *regionStatus) {
	ms, err := region.MirrorState(ctx, nc, r.Region, stream)
	if err != nil {
		r.Error = err.Error()
		return
	}
	r.Connected, r.Pending = ms.Connected, ms.Pending
	if ms.Error != "" {
		r.Error = "its mirror of the hub: " + ms.Error
	}
	cfg := client.DefaultConfig()
	cfg.Conn, cfg.ClusterName, cfg.Domain, cfg.Timeout = nc, cf.cluster, r.Region, cf.timeout
	c, err := client.New(cfg)
	if err == nil {
		err = c.Start()
	}
	if err != nil {
		r.Error = err.Error()
		return
	}
	defer c.Close(context.WithoutCancel(ctx)) //nolint:errcheck // read only
	select {
	case <-c.Ready():
	case <-ctx.Done():
		r.Error = "its buckets did not answer through the leafnode"
		return
	}
	m := c.Map()
	r.Reachable = true
	for _, id := range slices.Sorted(maps.Keys(m.Nodes)) {
		r.Nodes = append(r.Nodes, m.Nodes[id])
	}
	for _, p := range m.Partitions {
		if _, live := m.Nodes[p.NodeID]; live && p.Active && !slices.Contains(r.Active[p.DB], p.Version) {
			r.Active[p.DB] = append(r.Active[p.DB], p.Version)
		}
	}
	for _, vs := range r.Active {
		slices.Sort(vs)
	}
}

// printRegions prints one row per region and db, then the nodes.
func printRegions(w io.Writer, regions []*regionStatus) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REGION\tCONNECTED\tPENDING\tNODES\tDB\tACTIVE\tREGION PIN")
	// A region that does not answer shows "?" nodes; its error is below.
	for _, r := range regions {
		pending, nodes := "-", "?"
		if r.Connected {
			pending = fmt.Sprint(r.Pending)
		}
		if r.Reachable {
			nodes = fmt.Sprint(len(r.Nodes))
		}
		dbs := slices.Sorted(maps.Keys(r.Active))
		for db := range r.Pins {
			if !slices.Contains(dbs, db) {
				dbs = append(dbs, db)
			}
		}
		slices.Sort(dbs)
		if len(dbs) == 0 {
			dbs = []string{"-"}
		}
		for _, db := range dbs {
			active := strings.Join(r.Active[db], ",")
			if active == "" {
				active = "-"
			}
			pin := "-"
			if p, ok := r.Pins[db]; ok {
				pin = p.Version
				if pin == "" {
					pin = "before " + p.Before
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Region, yesNo(r.Connected), pending, nodes, db, active, pin)
		}
	}
	if len(regions) == 0 {
		fmt.Fprintln(tw, "(no region: name them with --region, or pin one)")
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "REGION\tNODE\tNAME\tSTATE\tADDRESS")
	for _, r := range regions {
		if r.Error != "" {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t(%s)\n", r.Region, r.Error)
		}
		for _, n := range r.Nodes {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Region, n.ID, n.Name, n.State, n.Address)
		}
	}
	tw.Flush()
}
