package main

import (
	"cmp"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// report is everything one run measured; it is printed by print and saved
// as JSON for later comparison.
type report struct {
	Started   time.Time        `json:"started"`
	Command   string           `json:"command"` // reproduces the run from the repository root
	Machine   machine          `json:"machine"`
	Dataset   genParams        `json:"dataset"`
	GenCached bool             `json:"gen_cached"`
	GenSecs   float64          `json:"gen_seconds"`
	Scenarios []scenarioResult `json:"scenarios"`
	// VsSequins compares each spangle scenario (by name) with sequins when
	// --sequins ran it.
	VsSequins map[string]*sequinsRatios `json:"vs_sequins,omitempty"`
	Failures  []string                  `json:"failures,omitempty"` // why the run failed; empty if it did not
}

// scenarioResult is what a scenario returns: one loadResult per connection
// count, build figures if it built anything, problems that make the run
// fail although figures were measured, and notes that do not.
type scenarioResult struct {
	Name          string       `json:"name"`
	Build         *buildResult `json:"build,omitempty"`
	Loads         []loadResult `json:"loads"`
	ServingRSSMiB float64      `json:"serving_rss_mib,omitempty"` // VmRSS after the loads
	// RssAnon is the heap and stacks, RssFile the mapped files (the
	// partitions' page cache), of ServingRSSMiB.
	ServingAnonMiB float64         `json:"serving_rss_anon_mib,omitempty"`
	ServingFileMiB float64         `json:"serving_rss_file_mib,omitempty"`
	ServingMem     *memSplit       `json:"serving_mem,omitempty"` // where ServingRSSMiB goes
	Cluster        *clusterResult  `json:"cluster,omitempty"`     // the cluster scenario's own figures
	Publish        *publishResult  `json:"publish,omitempty"`     // the publish scenario's
	PeerCopy       *peerCopyResult `json:"peercopy,omitempty"`    // the peercopy scenario's
	Delta          *deltaResult    `json:"delta,omitempty"`       // the delta scenario's
	Problems       []string        `json:"problems,omitempty"`
	Notes          []string        `json:"notes,omitempty"` // worth saying, but not failures
}

// buildResult describes building the dataset: Records and Seconds as the
// server reported them, WallSeconds from process start to ACTIVE.
type buildResult struct {
	Records       int64   `json:"records"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_second"` // Records / Seconds
	WallSeconds   float64 `json:"wall_seconds"`
	// ServingSeconds is from process start to the dataset's last key
	// answered with its value: start-to-serving, the same measure for
	// every server.
	ServingSeconds float64 `json:"serving_seconds,omitempty"`
	// ServingRounds are every start's ServingSeconds, in the order run,
	// when there were several (--start-rounds): ServingSeconds is their
	// median, the other figures are the last start's.
	ServingRounds []float64 `json:"serving_rounds,omitempty"`
	PeakRSSMiB    float64   `json:"peak_rss_mib"` // VmHWM read right after ACTIVE
}

// setServing sets ServingSeconds to the median of secs, and ServingRounds
// to secs if there are several.
func (b *buildResult) setServing(secs []float64) {
	b.ServingSeconds = median(secs)
	if len(secs) > 1 {
		b.ServingRounds = secs
	}
}

// loadResult is one load at one connection count, the unit every scenario
// reports in.
type loadResult struct {
	Scenario  string     `json:"scenario"`
	Conns     int        `json:"conns"`
	Threads   int        `json:"threads"`
	Seconds   float64    `json:"seconds"`
	Requests  int64      `json:"requests"`
	ReqPerSec float64    `json:"req_per_second"`
	P50us     int64      `json:"p50_us"`
	P99us     int64      `json:"p99_us"`
	MaxUs     int64      `json:"max_us"`
	Errors    loadErrors `json:"errors"` // of every round
	// VsBaseline is ReqPerSec over the baseline's at the same Conns: in
	// the load just before this one when the baseline ran alongside.
	VsBaseline float64 `json:"vs_baseline,omitempty"`
	// BaseP50us and BaseP99us are the latencies of the baseline load
	// paired with this one (its median round's pair).
	BaseP50us int64 `json:"baseline_p50_us,omitempty"`
	BaseP99us int64 `json:"baseline_p99_us,omitempty"`
	// Rounds are every round's VsBaseline (or req/s, without a baseline),
	// in the order run, when there were several: the row is the median
	// round's.
	Rounds []float64 `json:"rounds,omitempty"`

	// ServerCPUus is the server's CPU time per request, in microseconds:
	// steadier than ReqPerSec on a busy machine. OtherCPUPct is the share
	// of all CPUs that neither the server nor wrk used during the load
	// (other processes, the hypervisor's steal): above a few percent, the
	// figures were disturbed. Both are 0 where /proc cannot be read.
	ServerCPUus float64 `json:"server_cpu_us_per_req"`
	OtherCPUPct float64 `json:"other_cpu_percent"`
}

// busyThreshold is the OtherCPUPct above which the report warns.
const busyThreshold = 10

// setCPU fills the CPU figures from the server's CPU time, the others'
// (machine busy time less the server's and wrk's) and the load's wall time.
func (l *loadResult) setCPU(server, other, wall time.Duration) {
	if l.Requests > 0 {
		l.ServerCPUus = float64(server.Microseconds()) / float64(l.Requests)
	}
	l.OtherCPUPct = max(0, 100*other.Seconds()/(wall.Seconds()*float64(runtime.NumCPU())))
}

func newLoadResult(scenario string, r wrkRun, s wrkStats) loadResult {
	return loadResult{
		Scenario: scenario, Conns: r.Conns, Threads: r.threads(),
		Seconds: s.Elapsed.Seconds(), Requests: s.Requests,
		ReqPerSec: float64(s.Requests) / s.Elapsed.Seconds(),
		P50us:     s.P50.Microseconds(), P99us: s.P99.Microseconds(), MaxUs: s.Max.Microseconds(),
		Errors: s.Errors,
	}
}

// machine says what the figures were measured on.
type machine struct {
	CPUs          int    `json:"cpus"`
	CPUModel      string `json:"cpu_model,omitempty"`
	Kernel        string `json:"kernel,omitempty"`
	GoVersion     string `json:"go_version"`               // of this harness
	SpangleGo     string `json:"spangle_go,omitempty"`     // Go that built the spangle binary
	SpangleCommit string `json:"spangle_commit,omitempty"` // vcs.revision, "+dirty" if modified
	Wrk           string `json:"wrk,omitempty"`
}

func machineInfo(spangle, wrk string) machine {
	m := machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Wrk: wrkVersion(wrk)}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for l := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if bi, err := buildinfo.ReadFile(spangle); err == nil {
		m.SpangleGo = bi.GoVersion
		dirty := ""
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				m.SpangleCommit = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "+dirty"
				}
			}
		}
		if m.SpangleCommit != "" {
			m.SpangleCommit += dirty
		}
	}
	return m
}

// finish computes the ratios against the baseline and collects failures:
// problems, request errors, and scenarios without figures.
func (r *report) finish() {
	base := map[int]float64{}
	for _, s := range r.Scenarios {
		if s.Name == baselineName {
			for _, l := range s.Loads {
				base[l.Conns] = l.ReqPerSec
			}
		}
	}
	for i := range r.Scenarios {
		s := &r.Scenarios[i]
		for j := range s.Loads {
			l := &s.Loads[j]
			if b := base[l.Conns]; b > 0 && s.Name != baselineName && l.VsBaseline == 0 {
				l.VsBaseline = l.ReqPerSec / b
			}
			if n := l.Errors.Total(); n > 0 {
				r.Failures = append(r.Failures, fmt.Sprintf("%s at %d connections: %d failed requests (%s)", cmp.Or(l.Scenario, s.Name), l.Conns, n, l.Errors))
			}
		}
		for _, p := range s.Problems {
			r.Failures = append(r.Failures, s.Name+": "+p)
		}
	}
	r.VsSequins = r.versusSequins()
}

// print writes the report for a person.
func (r *report) print(w io.Writer) {
	m := r.Machine
	fmt.Fprintf(w, "spangle-bench %s\n", r.Started.UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "machine: %d CPUs (%s), linux %s, harness %s, wrk %s\n", m.CPUs, m.CPUModel, m.Kernel, m.GoVersion, m.Wrk)
	fmt.Fprintf(w, "spangle: built with %s, commit %s\n", orNone(m.SpangleGo), orNone(m.SpangleCommit))
	d := r.Dataset
	gen := fmt.Sprintf("generated in %.1f s", r.GenSecs)
	if r.GenCached {
		gen = "cached"
	}
	fmt.Fprintf(w, "dataset: %d records in %d uncompressed SequenceFiles, %d-byte keys, %d-byte values (db %s, version %s; %s)\n\n",
		d.Records, d.Files, d.KeySize, d.ValueSize, d.DB, d.Version, gen)

	// Columns are right-aligned; names are padded to read left-aligned.
	width := len("scenario")
	for _, s := range r.Scenarios {
		width = max(width, len(s.Name))
		for _, l := range s.Loads {
			width = max(width, len(l.Scenario))
		}
	}
	r.printBuilds(w, width)
	r.printMem(w, width)
	busy := r.printLoads(w, width)
	r.printSequins(w)
	r.printCluster(w)
	r.printPublish(w)
	r.printPeerCopy(w)
	r.printDelta(w)
	if busy {
		fmt.Fprintf(w, "note: other processes used over %d%% of the CPUs during some loads (other cpu); compare those rows with care.\n", busyThreshold)
	}
	for _, s := range r.Scenarios {
		for _, n := range s.Notes {
			fmt.Fprintf(w, "note: %s: %s\n", s.Name, n)
		}
	}
	fmt.Fprintf(w, "reproduce: %s\n", r.Command)
	if len(r.Failures) == 0 {
		fmt.Fprintln(w, "result: OK")
		return
	}
	fmt.Fprintf(w, "result: FAILED (%d problems; figures above are not valid)\n", len(r.Failures))
	for _, f := range r.Failures {
		fmt.Fprintf(w, "  - %s\n", f)
	}
}

// printBuilds writes the table of builds, if any scenario built anything.
func (r *report) printBuilds(w io.Writer, width int) {
	if !slices.ContainsFunc(r.Scenarios, func(s scenarioResult) bool { return s.Build != nil }) {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\trecords\tseconds\trecords/s\tstart to serving s\tpeak RSS MiB\tserving RSS MiB\tanon\tfile\t  start rounds\n", width, "build")
	for _, s := range r.Scenarios {
		if b := s.Build; b != nil {
			fmt.Fprintf(tw, "%-*s\t%d\t%.2f\t%.0f\t%.2f\t%.1f\t%.1f\t%.1f\t%.1f\t  %s\n", width, s.Name, b.Records, b.Seconds, b.RecordsPerSec, b.ServingSeconds, b.PeakRSSMiB, s.ServingRSSMiB, s.ServingAnonMiB, s.ServingFileMiB, roundsText(b.ServingRounds))
		}
	}
	tw.Flush()
	fmt.Fprintln(w)
}

// printMem writes where each serving process's RSS goes (memSplit), if
// any scenario measured it.
func (r *report) printMem(w io.Writer, width int) {
	if !slices.ContainsFunc(r.Scenarios, func(s scenarioResult) bool { return s.ServingMem != nil }) {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s	RSS MiB	binary	data files	libs	anon	Go heap	idle kept	stacks	runtime	outside Go	index	cache	  largest anon\n", width, "serving memory")
	for _, s := range r.Scenarios {
		m := s.ServingMem
		if m == nil {
			continue
		}
		largest := make([]string, len(m.AnonLargestMiB))
		for i, v := range m.AnonLargestMiB {
			largest[i] = fmt.Sprintf("%.1f", v)
		}
		fmt.Fprintf(tw, "%-*s\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t  %s\n", width, s.Name, s.ServingRSSMiB,
			m.BinaryMiB, m.DataFilesMiB, m.LibsMiB, m.AnonMiB, m.GoHeapMiB, m.GoHeapIdleMiB, m.GoStacksMiB, m.GoRuntimeMiB, m.OutsideGoMiB, m.IndexMiB, m.HotCacheMiB,
			strings.Join(largest, " "))
	}
	tw.Flush()
	fmt.Fprintln(w)
}

// printLoads writes the table of loads, if any scenario ran one, and
// reports whether other processes disturbed any.
func (r *report) printLoads(w io.Writer, width int) (busy bool) {
	if !slices.ContainsFunc(r.Scenarios, func(s scenarioResult) bool { return len(s.Loads) > 0 }) {
		return false
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\tconns\treq/s\tp50 ms\tp99 ms\tbase p50\tbase p99\terrors\tvs baseline\tcpu µs/req\tother cpu\t  rounds\n", width, "scenario")
	for _, s := range r.Scenarios {
		for _, l := range s.Loads {
			ratio := "-"
			if l.VsBaseline > 0 {
				ratio = fmt.Sprintf("%.2fx", l.VsBaseline)
			}
			name := s.Name
			if l.Scenario != "" {
				name = l.Scenario
			}
			baseP50, baseP99 := "-", "-"
			if l.BaseP99us > 0 {
				baseP50, baseP99 = fmt.Sprintf("%.3f", float64(l.BaseP50us)/1000), fmt.Sprintf("%.3f", float64(l.BaseP99us)/1000)
			}
			fmt.Fprintf(tw, "%-*s\t%d\t%.0f\t%.3f\t%.3f\t%s\t%s\t%s\t%s\t%.1f\t%.0f%%\t  %s\n", width, name, l.Conns, l.ReqPerSec,
				float64(l.P50us)/1000, float64(l.P99us)/1000, baseP50, baseP99, l.Errors, ratio, l.ServerCPUus, l.OtherCPUPct, roundsText(l.Rounds))
			busy = busy || l.OtherCPUPct > busyThreshold
		}
	}
	tw.Flush()
	fmt.Fprintln(w)
	return busy
}

// roundsText is rounds as a person reads them: ratios with two decimals,
// req/s whole.
func roundsText(rounds []float64) string {
	var out []string
	for _, x := range rounds {
		if x < 10 {
			out = append(out, fmt.Sprintf("%.2f", x))
		} else {
			out = append(out, fmt.Sprintf("%.0f", x))
		}
	}
	return strings.Join(out, " ")
}

// versusSequins compares each spangle scenario with the sequins one, if
// both ran: GET req/s at each connection count (spangle's over sequins'),
// start-to-serving speed (sequins' time over spangle's) and serving RSS
// (spangle's over sequins'); nil otherwise.
func (r *report) versusSequins() map[string]*sequinsRatios {
	var sq *scenarioResult
	for i := range r.Scenarios {
		if s := &r.Scenarios[i]; s.Name == sequinsName && s.Build != nil {
			sq = s
		}
	}
	if sq == nil {
		return nil
	}
	out := map[string]*sequinsRatios{}
	for i := range r.Scenarios {
		sp := &r.Scenarios[i]
		if !strings.HasPrefix(sp.Name, "spangle") || sp.Build == nil {
			continue
		}
		v := &sequinsRatios{GET: map[int]float64{}}
		for _, a := range sp.Loads {
			for _, b := range sq.Loads {
				switch {
				case a.Conns != b.Conns:
				case a.VsBaseline > 0 && b.VsBaseline > 0:
					// Each against the baseline load just before it: the
					// machine's drift between the two scenarios cancels.
					v.GET[a.Conns] = a.VsBaseline / b.VsBaseline
				case b.ReqPerSec > 0:
					v.GET[a.Conns] = a.ReqPerSec / b.ReqPerSec
				}
			}
		}
		if sp.Build.ServingSeconds > 0 {
			v.StartSpeed = sq.Build.ServingSeconds / sp.Build.ServingSeconds
		}
		if sq.ServingRSSMiB > 0 {
			v.RSS = sp.ServingRSSMiB / sq.ServingRSSMiB
		}
		out[sp.Name] = v
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// sequinsRatios are spangle's figures as multiples of sequins'.
type sequinsRatios struct {
	GET        map[int]float64 `json:"get"`         // req/s by connections; above 1: spangle serves more
	StartSpeed float64         `json:"start_speed"` // above 1: spangle serves sooner
	RSS        float64         `json:"rss"`         // below 1: spangle uses less
}

// printSequins writes VsSequins, if sequins ran.
func (r *report) printSequins(w io.Writer) {
	for _, name := range slices.Sorted(maps.Keys(r.VsSequins)) {
		v := r.VsSequins[name]
		fmt.Fprintf(w, "%s vs sequins (same run, same data): start to serving %.2fx sequins' speed; serving RSS %.2fx sequins'", name, v.StartSpeed, v.RSS)
		for _, n := range slices.Sorted(maps.Keys(v.GET)) {
			fmt.Fprintf(w, "; GET at %d conns %.2fx", n, v.GET[n])
		}
		fmt.Fprintln(w)
	}
	if len(r.VsSequins) > 0 {
		fmt.Fprintln(w)
	}
}

// printCluster writes the cluster scenario's own figures, if it ran.
func (r *report) printCluster(w io.Writer) {
	for _, s := range r.Scenarios {
		c := s.Cluster
		if c == nil {
			continue
		}
		fmt.Fprintf(w, "cluster: %d nodes, replication 2, %d records (--cluster-records); every node served the version %.2f s after _SUCCESS + SIGHUP\n",
			clusterNodes, c.Records, c.ConvergeSecs)
		if c.ThroughputRatio > 0 {
			var rounds []string
			for _, r := range c.Ratios {
				rounds = append(rounds, fmt.Sprintf("%.2f", r))
			}
			fmt.Fprintf(w, "  proxied/local: %.2fx req/s, p99 %+.2f ms, medians of %d rounds (%s); wrk against node 1 only; the rows are round 1's, cpu µs/req is all nodes'\n",
				c.ThroughputRatio, c.P99DiffMs, len(c.Ratios), strings.Join(rounds, ", "))
		}
		if u := c.Upgrades; u != nil {
			fmt.Fprintf(w, "  upgrades under load: %d upgrades (%d records each), %d readers over the nodes: %d requests, %d failed, %d version regressions; "+
				"every node switched %.2f s after _SUCCESS + SIGHUP (mean), %.2f s (max)\n",
				u.Upgrades, u.Records, u.Readers, u.Requests, u.Failed, u.Regressions, u.SwitchMeanSecs, u.SwitchMaxSecs)
		}
		fmt.Fprintln(w)
	}
}

// printDelta writes the delta scenario's figures, if it ran.
func (r *report) printDelta(w io.Writer) {
	for _, s := range r.Scenarios {
		d := s.Delta
		if d == nil || d.Full.ServeSecs == 0 {
			continue
		}
		fmt.Fprintf(w, "delta: %d records, %d updated, %d added, %d deleted; %d nodes (replication 2); the same next version published as a delta and in full, one run\n",
			d.Records, d.Updated, d.Added, d.Deleted, clusterNodes)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "  \tbytes uploaded\tpublish s\tpublisher cpu s\tpublish to serving s\tnode cpu s\t(idle included)\t\n")
		for _, row := range []struct {
			name string
			r    deltaRun
		}{{"delta (--base)", d.Delta}, {"delta (job's)", d.Job}, {"full", d.Full}} {
			fmt.Fprintf(tw, "  %s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", row.name, row.r.Uploaded, row.r.PublishSecs, row.r.PublisherCPU, row.r.ServeSecs, row.r.NodeCPUSecs, row.r.NodeCPURaw)
		}
		fmt.Fprintf(tw, "  delta (--base)/full\t%.4f\t\t\t%.3f\t%.3f\t\t\n", d.Bytes, d.Time, d.NodeCPU)
		fmt.Fprintf(tw, "  delta (job's)/full\t%.4f\t\t\t%.3f\t%.3f\t\t\n", float64(d.Job.Uploaded)/float64(max(d.Full.Uploaded, 1)), d.JobTime, d.JobNodeCPU)
		tw.Flush()
		fmt.Fprintf(w, "  the job's delta: spangle delta NEW OLD took %.2f s, before its publish; node cpu is less the nodes' idle %.3f cpu-s/s\n", d.JobSecs, d.IdleCPU)
		fmt.Fprintln(w, "  timeline, s (publisher: its output; nodes: their logs; from the publish's start unless taken):")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "  	delta computed, took	uploaded, took	publisher exited	first node saw it	longest build, took	last node active	bench saw all serve	\n")
		for _, row := range []struct {
			name string
			r    deltaRun
		}{{"delta (--base)", d.Delta}, {"delta (job's)", d.Job}, {"full", d.Full}} {
			t := row.r.Timeline
			fmt.Fprintf(tw, "  %s\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t\n", row.name, t.Computed, t.Uploaded, row.r.PublishSecs, t.Seen, t.Build, t.Active, row.r.ServeSecs)
		}
		tw.Flush()
		fmt.Fprintln(w, "  goals: bytes ≤ 0.03, publish to serving ≤ 0.25, node cpu ≤ 0.25")
		fmt.Fprintln(w)
	}
}

// printPublish writes the publish scenario's figures, if it ran.
func (r *report) printPublish(w io.Writer) {
	for _, s := range r.Scenarios {
		p := s.Publish
		if p == nil || len(p.PublishSecs) == 0 {
			continue
		}
		fmt.Fprintf(w, "publish: %d records, %d files, %.1f MB, to node 1's embedded NATS Object Store; %d nodes (source nats-object://%s, replication 2)\n",
			p.Records, p.Files, float64(p.Bytes)/1e6, clusterNodes, publishBucket)
		secs := func(xs []float64) string {
			var s []string
			for _, x := range xs {
				s = append(s, fmt.Sprintf("%.2f", x))
			}
			return strings.Join(s, ", ") + " s"
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "  spangle publish\t%.1f MB/s\t%s\t%.2fx raw Put (median of the rounds')\t\n", p.PublishMBps, secs(p.PublishSecs), p.Ratio)
		fmt.Fprintf(tw, "  raw Put, one object (baseline)\t%.1f MB/s\t%s\t\t\n", p.RawPutMBps, secs(p.RawPutSecs))
		fmt.Fprintf(tw, "  local file copy, no sync\t%.1f MB/s\t\t\t\n", p.CopyMBps)
		if p.LastPublishSecs > 0 {
			fmt.Fprintf(tw, "  publish to the nodes' bucket\t%.1f MB/s\t%.2f s\t\t\n", float64(p.Bytes)/1e6/p.LastPublishSecs, p.LastPublishSecs)
		}
		if p.ServeSecs > 0 {
			fmt.Fprintf(tw, "  its exit -> every node serving\t\t%.2f s\t\t\n", p.ServeSecs)
		}
		if p.RepublishSecs > 0 {
			fmt.Fprintf(tw, "  publish again (all skipped)\t\t%.2f s\t\t\n", p.RepublishSecs)
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
}

// writeJSON saves the report at path.
func (r *report) writeJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func orNone(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
