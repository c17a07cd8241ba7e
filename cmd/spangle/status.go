package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"github.com/spangledb/spangle"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spangledb/spangle/edge/client"
	"github.com/spangledb/spangle/internal/errtext"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/advert"
)

// status runs "spangle status": the dbs, versions, partitions × replicas
// and nodes, from a node's HTTP status or from the cluster's KV buckets.
func status(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("status", "usage: spangle status [--http URL [--cacert FILE] | --nats URL] [--json] [--regions [--region R,…]]", stderr)
	cf := addClientFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON: the node's status (HTTP) or the cluster map (NATS)")
	regions := fs.Bool("regions", false, "the regions of the hub at --nats (those its regions announce, those named with --region, those a region pin names): connected, nodes, active versions, region pins")
	regionNames := fs.String("region", "", "with --regions: regions to show besides those announced, comma-separated")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usagef("status takes no arguments (got %q)", fs.Args())
	}
	ctx, cancel := context.WithTimeout(context.Background(), cf.timeout)
	defer cancel()
	if *regions {
		var wanted []string
		if *regionNames != "" {
			wanted = strings.Split(*regionNames, ",")
		}
		return regionsStatus(ctx, cf, wanted, stdout, *asJSON)
	}
	if cf.natsURL == "" {
		return httpStatus(ctx, cf, stdout, *asJSON)
	}
	c, closeAll, err := cf.open()
	if err != nil {
		return err
	}
	defer closeAll()
	select {
	case <-c.Ready():
	case <-ctx.Done():
		return fmt.Errorf("cluster map of %q not read within %v (is the cluster name right?)", cf.cluster, cf.timeout)
	}
	m := c.Map()
	// Every pin of the versions bucket, a db's that no node serves too.
	pins := make([]bucketPin, 0, len(m.Pins))
	for key, p := range m.Pins {
		_, region, _ := advert.ParsePinKey(key)
		pins = append(pins, bucketPin{Pin: p, Region: region})
	}
	sortPins(pins)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		// snake_case, as every other JSON spangle writes.
		return enc.Encode(struct {
			Loaded     bool                      `json:"loaded"`
			Nodes      map[string]advert.Node    `json:"nodes"`
			Partitions []advert.Partitions       `json:"partitions"`
			Versions   map[string]advert.Version `json:"versions"`
			Pins       []bucketPin               `json:"pins"`
		}{m.Loaded, m.Nodes, m.Partitions, m.Versions, pins})
	}
	printMap(stdout, m)
	printBucketPins(stdout, pins, &pinFlags{natsURL: cf.natsURL, cluster: cf.cluster, creds: cf.creds})
	return nil
}

// httpStatus prints one node's status, GET / with Accept: application/json.
func httpStatus(ctx context.Context, cf *clientFlags, stdout io.Writer, asJSON bool) error {
	base := cf.httpURL
	if base == "" {
		base = spangle.LocalURL
	}
	base = strings.TrimRight(spangle.SplitList(base)[0], "/")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	hc, err := cf.tls.client()
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s/: %s", base, resp.Status)
	}
	if asJSON {
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			return fmt.Errorf("GET %s/: %w", base, err)
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	var st node.Status
	if err := json.Unmarshal(body, &st); err != nil {
		return fmt.Errorf("GET %s/: %w", base, err)
	}
	printStatus(stdout, base, st)
	return nil
}

// bucketPin is a pin of the versions bucket: for all regions (Region
// ""), or for one.
type bucketPin struct {
	advert.Pin
	Region string `json:"region,omitempty"`
}

// sortPins sorts pins by db, then region.
func sortPins(pins []bucketPin) {
	slices.SortFunc(pins, func(a, b bucketPin) int {
		return cmp.Or(strings.Compare(a.DB, b.DB), strings.Compare(a.Region, b.Region))
	})
}

// printBucketPins prints the pins of the versions bucket: each db's pin
// for all regions and for each region, who wrote it and when, and the
// command that removes it.
func printBucketPins(w io.Writer, pins []bucketPin, pf *pinFlags) {
	fmt.Fprintln(w)
	if len(pins) == 0 {
		fmt.Fprintln(w, "no pins")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PINNED DB\tREGION\tTO\tBY\tAT\tUNPIN WITH")
	for _, p := range pins {
		to, region := p.Version, p.Region
		if to == "" {
			to = "newest before " + p.Before
		}
		if region == "" {
			region = "(all)"
		}
		unpin := *pf
		unpin.region = p.Region
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.DB, region, to, p.By, p.At.Format(time.RFC3339), unpin.unpin(p.DB))
	}
	tw.Flush()
}

// printStatus prints a node's status as a table, one row per version and
// node.
func printStatus(w io.Writer, base string, st node.Status) {
	fmt.Fprintf(w, "status of %s", base)
	if st.Release != "" {
		fmt.Fprintf(w, " (spangle %s)", st.Release)
	}
	fmt.Fprint(w, "\n\n")
	if st.SourceError != "" {
		fmt.Fprintf(w, "source unavailable: %s\n\n", errtext.Strip(st.SourceError))
	}
	if len(st.DBs) == 0 {
		fmt.Fprintln(w, "no dbs")
		printOtherPins(w, st)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DB\tVERSION\tNODE\tSTATE\tCURRENT\tHELD\tREPLICAS AVG\tMISSING\tBUILD")
	for _, db := range slices.Sorted(maps.Keys(st.DBs)) {
		vs := st.DBs[db].Versions
		for _, v := range slices.Sorted(maps.Keys(vs)) {
			s := vs[v]
			build := ""
			switch {
			case s.Build != nil && s.Build.WaitingForBuilder != "":
				build = "waiting for its builder " + s.Build.WaitingForBuilder + " (build once)"
			case s.Build != nil && s.Build.DurationSec == 0:
				build = fmt.Sprintf("%.1f%%", s.Build.Percent)
			}
			for _, name := range slices.Sorted(maps.Keys(s.Nodes)) {
				nv := s.Nodes[name]
				b := build
				switch {
				case nv.Error != "":
					b = "error: " + errtext.Strip(nv.Error)
				case nv.Forced:
					b = "forced past its guards: " + nv.Refused
				case nv.Refused != "":
					b = "refused: " + nv.Refused + " (spangle activate --force " + db + " " + v + " activates it)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%.2f (target %d)\t%d\t%s\n", db, v, name, nv.State,
					yesNo(nv.Current), len(nv.Partitions), s.NumPartitions, s.AverageReplication,
					s.TargetReplication, s.MissingPartitions, b)
			}
		}
	}
	tw.Flush()
	printPins(w, st)
}

// printPins prints each pinned db's pin, and why the node cannot follow
// it when it cannot.
func printPins(w io.Writer, st node.Status) {
	first := true
	for _, db := range slices.Sorted(maps.Keys(st.DBs)) {
		ds := st.DBs[db]
		if ds.Pinned == "" && ds.PinError == "" && ds.SourceError == "" {
			continue
		}
		if first {
			fmt.Fprintln(w)
			first = false
		}
		if ds.Pinned != "" {
			fmt.Fprintf(w, "%s: pinned to %s (spangle activate --latest %s unpins)\n", db, ds.Pinned, db)
		}
		if ds.PinError != "" {
			fmt.Fprintf(w, "%s: cannot follow the pin: %s\n", db, errtext.Strip(ds.PinError))
		}
		if ds.SourceError != "" {
			fmt.Fprintf(w, "%s: cannot list versions: %s\n", db, errtext.Strip(ds.SourceError))
		}
	}
	if first && len(st.OtherPins) > 0 {
		fmt.Fprintln(w)
	}
	printOtherPins(w, st)
}

// printOtherPins prints the pins the node keeps for dbs it does not serve.
func printOtherPins(w io.Writer, st node.Status) {
	for _, db := range slices.Sorted(maps.Keys(st.OtherPins)) {
		fmt.Fprintf(w, "%s: pinned to %s, a db this node does not serve (spangle activate --latest %s unpins)\n", db, st.OtherPins[db], db)
	}
}

// printMap prints the cluster map: nodes, then each db's versions with
// partitions × replicas.
func printMap(w io.Writer, m client.Map) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tNAME\tSHARD\tSTATE\tADDRESS\tUP\tRELEASE")
	now := time.Now()
	for _, id := range slices.Sorted(maps.Keys(m.Nodes)) {
		n := m.Nodes[id]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", id, n.Name, n.ShardID, n.State, n.Address,
			now.Sub(n.Started).Round(time.Second), n.BinaryVersion)
	}
	if len(m.Nodes) == 0 {
		fmt.Fprintln(tw, "(none)")
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "DB\tVERSION\tLIVE\tPARTITIONS\tPARTITIONER\tREPLICAS MIN/AVG/MAX\tMISSING\tNODES")
	groups := map[dbVersion][]advert.Partitions{}
	for _, p := range m.Partitions {
		k := dbVersion{p.DB, p.Version}
		groups[k] = append(groups[k], p)
	}
	for db, v := range m.Versions {
		k := dbVersion{db, v.Version}
		if _, ok := groups[k]; !ok {
			groups[k] = nil
		}
	}
	keys := slices.SortedFunc(maps.Keys(groups), func(a, b dbVersion) int {
		if c := strings.Compare(a.db, b.db); c != 0 {
			return c
		}
		return strings.Compare(a.version, b.version)
	})
	for _, k := range keys {
		entries := groups[k]
		live := m.Versions[k.db].Version == k.version
		n, partitioner := 0, ""
		if v, ok := m.Versions[k.db]; ok && live {
			n, partitioner = v.NumPartitions, v.Partitioner
		}
		var nodes []string
		for _, e := range entries {
			n, partitioner = e.NumPartitions, e.Partitioner
			nodes = append(nodes, e.NodeID)
		}
		lo, avg, hi, missing := replicas(n, entries)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d/%.2f/%d\t%d\t%s\n", k.db, k.version, yesNo(live), n, partitioner,
			lo, avg, hi, missing, strings.Join(nodes, ","))
	}
	if len(keys) == 0 {
		fmt.Fprintln(tw, "(none)")
	}
	printRefusals(tw, keys, groups)
	printNodePins(tw, m)
	printBuildFailures(tw, m)
	tw.Flush()
}

// printBuildFailures prints, by node, the last version of each db whose
// build failed there and why (a builder's peers build theirs then: build
// once).
func printBuildFailures(tw io.Writer, m client.Map) {
	sec := section{w: tw, heading: "DB\tVERSION\tNODE\tLAST BUILD FAILED"}
	for _, id := range slices.Sorted(maps.Keys(m.Nodes)) {
		failed := m.Nodes[id].BuildFailed
		for _, db := range slices.Sorted(maps.Keys(failed)) {
			f := failed[db]
			sec.row("%s\t%s\t%s\t%s\n", db, f.Version, id, errtext.Strip(f.Reason))
		}
	}
}

// dbVersion names a version of a db in the cluster map.
type dbVersion struct{ db, version string }

// printRefusals prints the versions a node's guards refuse, and why.
func printRefusals(tw io.Writer, keys []dbVersion, groups map[dbVersion][]advert.Partitions) {
	sec := section{w: tw, heading: "DB\tVERSION\tNODE\tREFUSED BY ITS GUARDS (spangle activate --force DB VERSION activates it)"}
	for _, k := range keys {
		for _, e := range groups[k] {
			if e.Refused == "" {
				continue
			}
			sec.row("%s\t%s\t%s\t%s\n", e.DB, e.Version, e.NodeID, e.Refused)
		}
	}
}

// printNodePins prints each node's answer to each db's pin: the version
// it follows, or why it cannot.
func printNodePins(tw io.Writer, m client.Map) {
	sec := section{w: tw, heading: "DB\tNODE\tPINNED TO\tFOLLOWS"}
	for _, id := range slices.Sorted(maps.Keys(m.Nodes)) {
		pins := m.Nodes[id].Pins
		for _, db := range slices.Sorted(maps.Keys(pins)) {
			p := pins[db]
			follows := p.Target
			switch {
			case p.Error != "":
				follows = "cannot follow the pin: " + errtext.Strip(p.Error)
			case follows == "":
				follows = "(not answered yet)"
			}
			sec.row("%s\t%s\t%s\t%s\n", db, id, p.Pin, follows)
		}
	}
}

// section is a table of the cluster map under its heading: the blank
// line and the heading are printed before its first row, and nothing when
// it has none.
type section struct {
	w       io.Writer
	heading string
	started bool
}

// row prints a row of the table, with fmt.Fprintf's format and args.
func (s *section) row(format string, args ...any) {
	if !s.started {
		fmt.Fprintln(s.w)
		fmt.Fprintln(s.w, s.heading)
		s.started = true
	}
	fmt.Fprintf(s.w, format, args...)
}

// replicas counts the replicas of each of n partitions over the entries.
func replicas(n int, entries []advert.Partitions) (lo int, avg float64, hi, missing int) {
	if n <= 0 {
		return 0, 0, 0, 0
	}
	counts := make([]int, n)
	for _, e := range entries {
		for _, p := range e.Partitions {
			if p >= 0 && p < n {
				counts[p]++
			}
		}
	}
	lo, hi = counts[0], counts[0]
	total := 0
	for _, c := range counts {
		lo, hi = min(lo, c), max(hi, c)
		total += c
		if c == 0 {
			missing++
		}
	}
	return lo, float64(total) / float64(n), hi, missing
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
