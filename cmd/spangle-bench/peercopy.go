package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The peercopy scenario (issue 35): three nodes, replication 2, on a
// dataset of --peercopy-records, run twice in one run: with build once
// off (every node builds its partitions from the source: the old way)
// and on (one node builds, the others copy; once per
// --peercopy-bandwidths, the senders' peer_copy_bandwidth). Each run publishes the
// version and measures the time until every node serves it and the
// bytes the nodes read from the source; then, --rounds times, loads node
// 1 at rest for --peercopy-window, wipes node 3 and starts it again, and
// loads node 1 again from node 3's join on: node 3's time to serve its
// share and what it read from the source, and node 1's GET p99 at rest
// and meanwhile (medians of the rounds). With build once off the wiped
// node is given a peer token its peers refuse, so that it builds its
// share from the source (as before peer copies): that is "its build
// time".

// peerCopyResult is the scenario's own figures.
type peerCopyResult struct {
	Records     int64          `json:"records"`
	SourceBytes int64          `json:"source_bytes"`
	Conns       int            `json:"conns"`
	Runs        []peerCopyMode `json:"runs"` // build once off, then on (once per bandwidth)
}

// peerCopyMode is one run of the scenario.
type peerCopyMode struct {
	BuildOnce bool `json:"build_once"`
	// Bandwidth is the nodes' peer_copy_bandwidth; "": spangle's default.
	Bandwidth string `json:"peer_copy_bandwidth,omitempty"`
	// The new version: from _SUCCESS + SIGHUP to every node serving it,
	// the bytes all nodes read from the source, and that over the
	// source's size.
	NewVersionSecs float64 `json:"new_version_seconds"`
	SourceRead     float64 `json:"source_read_bytes"`
	ReadRatio      float64 `json:"source_read_ratio"`
	// The wiped node 3, the median of --rounds wipes (each its own round
	// in Wipes): see peerCopyWipe.
	WipedSecs      float64        `json:"wiped_seconds"`
	WipedBuildSecs float64        `json:"wiped_build_seconds"`
	WipedRead      float64        `json:"wiped_source_read_bytes"`
	WipedCopied    float64        `json:"wiped_copied_bytes"`
	RestP99ms      float64        `json:"rest_p99_ms"`
	DuringP99ms    float64        `json:"during_p99_ms"`
	P99Ratio       float64        `json:"during_vs_rest_p99"` // median of the rounds' ratios
	DuringErrors   int64          `json:"during_errors"`      // all rounds'
	Wipes          []peerCopyWipe `json:"wipes"`
}

// peerCopyWipe is one wipe of node 3: from its start to serving its
// share (ACTIVE in its status), its own build (or copy) time
// (spangle_build_duration_seconds), what it read from the source and
// copied; node 1's GET p99 under wrk at rest just before, and while node
// 3 loads its share (wrk starts when node 3 has joined, for
// --peercopy-window).
type peerCopyWipe struct {
	Secs        float64 `json:"seconds"`
	BuildSecs   float64 `json:"build_seconds"`
	Read        float64 `json:"source_read_bytes"`
	Copied      float64 `json:"copied_bytes"`
	RestP99ms   float64 `json:"rest_p99_ms"`
	DuringP99ms float64 `json:"during_p99_ms"`
	Errors      int64   `json:"during_errors"`
}

// runPeerCopy is the peercopy scenario.
func runPeerCopy(ctx context.Context, b *bench) (res scenarioResult, err error) {
	res.Name = "peercopy"
	p := b.cfg.Gen
	p.Records = b.cfg.PeerCopyRecords
	src := filepath.Join(b.cfg.Work, "peercopy-source")
	b.log.Info("peercopy: generating dataset", "dir", src, "records", p.Records)
	if _, err := generate(src, p); err != nil {
		return res, err
	}
	pc := &peerCopyResult{Records: p.Records, Conns: b.cfg.PeerCopyConns}
	res.PeerCopy = pc
	parts, err := filepath.Glob(filepath.Join(src, p.DB, p.Version, "part-*"))
	if err != nil {
		return res, err
	}
	for _, f := range parts {
		if fi, err := os.Stat(f); err == nil {
			pc.SourceBytes += fi.Size()
		}
	}
	script := filepath.Join(b.cfg.Work, "peercopy.lua")
	if err := writeWrkScript(script, p.Records, p.KeySize, "/"+p.DB+"/", false); err != nil {
		return res, err
	}
	runs := []peerCopyMode{{}} // build once off
	bandwidths := b.cfg.PeerCopyBandwidths
	if len(bandwidths) == 0 {
		bandwidths = []string{""} // spangle's default
	}
	for _, bw := range bandwidths {
		runs = append(runs, peerCopyMode{BuildOnce: true, Bandwidth: bw})
	}
	for _, run := range runs {
		if err := settle(src); err != nil {
			return res, err
		}
		m, err := b.peerCopyRun(ctx, src, script, p, run, &res)
		pc.Runs = append(pc.Runs, m)
		if err != nil {
			return res, fmt.Errorf("build_once = %v, peer_copy_bandwidth %q: %w", run.BuildOnce, run.Bandwidth, err)
		}
	}
	return res, nil
}

// peerCopyRun is one run of the scenario, build once on or off (m's
// BuildOnce and Bandwidth), with its figures in m.
func (b *bench) peerCopyRun(ctx context.Context, src, script string, p genParams, m peerCopyMode, res *scenarioResult) (_ peerCopyMode, err error) {
	once := m.BuildOnce
	tmp, err := os.MkdirTemp(b.cfg.Work, dataDirPrefix)
	if err != nil {
		return m, err
	}
	defer os.RemoveAll(tmp)
	root := filepath.Join(tmp, "source")
	versionDir, err := linkDataset(src, root, p)
	if err != nil {
		return m, err
	}
	logs := "peercopy-off"
	if once {
		logs = "peercopy-once" + strings.NewReplacer(" ", "", "/", "").Replace(m.Bandwidth)
	}
	extra := fmt.Sprintf("peer_token = \"bench\"\n[cluster]\nbuild_once = %v\n", once)
	if m.Bandwidth != "" {
		extra += fmt.Sprintf("peer_copy_bandwidth = %q\n", m.Bandwidth)
	}
	nodes, _, err := b.startCluster(ctx, clusterSpec{dir: tmp, source: root, logs: logs, extra: extra})
	defer stopCluster(nodes, res)
	if err != nil {
		return m, err
	}
	start := time.Now()
	if err := markAndSignal(versionDir, nodes); err != nil {
		return m, err
	}
	if _, err := b.waitServing(ctx, nodes, p, p.Version); err != nil {
		return m, err
	}
	m.NewVersionSecs = time.Since(start).Seconds()
	for _, n := range nodes {
		v, err := scrapeCounter("http://"+n.addr+"/metrics", "spangle_source_read_bytes_total")
		if err != nil {
			return m, err
		}
		m.SourceRead += v
	}
	m.ReadRatio = m.SourceRead / float64(max(res.PeerCopy.SourceBytes, 1))
	b.log.Info("peercopy: new version served", "build_once", once, "peer_copy_bandwidth", m.Bandwidth, "seconds", m.NewVersionSecs, "source_read_ratio", m.ReadRatio)

	url := "http://" + nodes[0].addr + "/"
	if b.cfg.Warmup > 0 { // the partitions read once, as at rest
		if _, err := runWrk(ctx, b.wrk, wrkRun{Script: script, URL: url, Conns: b.cfg.PeerCopyConns, Duration: b.cfg.Warmup}); err != nil {
			return m, err
		}
	}
	for round := range b.cfg.Rounds {
		w, err := b.peerCopyWipe(ctx, nodes[0], nodes[2], script, p, once, round)
		m.Wipes = append(m.Wipes, w)
		if err != nil {
			return m, err
		}
	}
	var secs, build, read, copied, rest, during, ratio []float64
	for _, w := range m.Wipes {
		secs, build, read, copied = append(secs, w.Secs), append(build, w.BuildSecs), append(read, w.Read), append(copied, w.Copied)
		rest, during = append(rest, w.RestP99ms), append(during, w.DuringP99ms)
		ratio = append(ratio, w.DuringP99ms/max(w.RestP99ms, 1e-9))
		m.DuringErrors += w.Errors
	}
	m.WipedSecs, m.WipedBuildSecs, m.WipedRead, m.WipedCopied = median(secs), median(build), median(read), median(copied)
	m.RestP99ms, m.DuringP99ms, m.P99Ratio = median(rest), median(during), median(ratio)
	return m, nil
}

// peerCopyWipe loads n1 at rest, then stops n3, empties its data dir and
// starts it again, and measures it and n1 meanwhile (peerCopyWipe's
// fields). With build once off, n3 is given a peer token its peers
// refuse: it builds its share from the source.
func (b *bench) peerCopyWipe(ctx context.Context, n1, n3 *clusterNode, script string, p genParams, once bool, round int) (w peerCopyWipe, err error) {
	url := "http://" + n1.addr + "/"
	load := wrkRun{Script: script, URL: url, Conns: b.cfg.PeerCopyConns, Duration: b.cfg.PeerCopyWindow}
	rest, err := runWrk(ctx, b.wrk, load)
	if err != nil {
		return w, err
	}
	w.RestP99ms = ms(rest.P99)
	if err := n3.c.stop(); err != nil {
		return w, err
	}
	if err := os.RemoveAll(n3.dataDir()); err != nil {
		return w, err
	}
	if !once && round == 0 { // its peers refuse its copies: it builds from the source
		cfg, err := os.ReadFile(n3.configPath())
		if err != nil {
			return w, err
		}
		cfg = []byte(strings.Replace(string(cfg), `peer_token = "bench"`, `peer_token = "refused"`, 1))
		if err := os.WriteFile(n3.configPath(), cfg, 0o644); err != nil {
			return w, err
		}
	}
	n3.spec.logs = strings.TrimSuffix(n3.spec.logs, fmt.Sprintf("-wiped%d", round-1)) + fmt.Sprintf("-wiped%d", round)
	restart := time.Now()
	if err := b.startNode(n3); err != nil {
		return w, err
	}
	err = pollUntil(ctx, n3.c, 60*time.Second, 10*time.Millisecond, n3.c.name+" to join", func() error {
		log, _ := os.ReadFile(n3.c.logPath)
		if clusterNodeCount(log) < 0 {
			return errNotYet
		}
		return nil
	})
	if err != nil {
		return w, err
	}
	during := make(chan error, 1)
	var stats wrkStats
	go func() {
		var err error
		stats, err = runWrk(ctx, b.wrk, load)
		during <- err
	}()
	client := &http.Client{Timeout: 5 * time.Second}
	err = pollUntil(ctx, n3.c, b.cfg.BuildTimeout, pollInterval, n3.c.name+" to serve its share", func() error {
		vs, err := clusterStatus(ctx, client, n3.addr, p.DB, p.Version)
		if err != nil {
			return err
		}
		if st := vs.Nodes[n3.addr]; st.State != "ACTIVE" {
			return fmt.Errorf("%w: %s", errNotYet, st.State)
		}
		return nil
	})
	w.Secs = time.Since(restart).Seconds()
	if werr := <-during; err == nil {
		err = werr
	}
	if err != nil {
		return w, err
	}
	w.DuringP99ms, w.Errors = ms(stats.P99), stats.Errors.Total()
	metrics := "http://" + n3.addr + "/metrics"
	if w.BuildSecs, err = scrapeCounter(metrics, "spangle_build_duration_seconds"); err != nil {
		return w, err
	}
	if w.Read, err = scrapeCounter(metrics, "spangle_source_read_bytes_total"); err != nil {
		return w, err
	}
	w.Copied, _ = scrapeCounter(metrics, "spangle_peer_copy_bytes_total") // none before a copy
	b.log.Info("peercopy: wiped node serves its share", "build_once", once, "round", round+1, "seconds", w.Secs, "build_seconds", w.BuildSecs,
		"source_read", w.Read, "rest_p99_ms", w.RestP99ms, "during_p99_ms", w.DuringP99ms)
	return w, nil
}

// bandwidthText names a run's peer_copy_bandwidth, when set.
func bandwidthText(m peerCopyMode) string {
	if !m.BuildOnce || m.Bandwidth == "" {
		return ""
	}
	return " (peer_copy_bandwidth " + m.Bandwidth + ")"
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// printPeerCopy writes the peercopy scenario's figures, if it ran.
func (r *report) printPeerCopy(w io.Writer) {
	for _, s := range r.Scenarios {
		pc := s.PeerCopy
		if pc == nil || len(pc.Runs) == 0 {
			continue
		}
		fmt.Fprintf(w, "peercopy: %d nodes, replication 2, %d records (--peercopy-records), %.0f MiB of source; build_once off, then on; wrk at %d connections on node 1\n",
			clusterNodes, pc.Records, float64(pc.SourceBytes)/(1<<20), pc.Conns)
		for _, m := range pc.Runs {
			var rounds []string
			for _, x := range m.Wipes {
				rounds = append(rounds, fmt.Sprintf("%.2f s, p99 %.1f/%.1f ms", x.BuildSecs, x.RestP99ms, x.DuringP99ms))
			}
			fmt.Fprintf(w, "  build_once=%-5v%s new version: served by all in %.2f s, source read %.2fx its size\n", m.BuildOnce, bandwidthText(m), m.NewVersionSecs, m.ReadRatio)
			fmt.Fprintf(w, "    wiped node 3 (medians of %d): served its share %.2f s after its start (build or copy %.2f s), read %.0f bytes of the source, copied %.0f; "+
				"node 1 p99 %.2f ms at rest, %.2f ms while node 3 loads (%.2fx, median of the rounds' ratios), %d failed requests; rounds: %s\n",
				len(m.Wipes), m.WipedSecs, m.WipedBuildSecs, m.WipedRead, m.WipedCopied, m.RestP99ms, m.DuringP99ms, m.P99Ratio, m.DuringErrors,
				strings.Join(rounds, "; "))
		}
		for _, on := range pc.Runs[1:] {
			off := pc.Runs[0]
			fmt.Fprintf(w, "  on%s/off: new version source reads %.2fx (%.2fx → %.2fx), time to serve it %.2fx; wiped node's load %.2fx of its build time (%.2f s / %.2f s), wall %.2fx\n",
				bandwidthText(on), on.ReadRatio/max(off.ReadRatio, 1e-9), off.ReadRatio, on.ReadRatio, on.NewVersionSecs/max(off.NewVersionSecs, 1e-9),
				on.WipedBuildSecs/max(off.WipedBuildSecs, 1e-9), on.WipedBuildSecs, off.WipedBuildSecs, on.WipedSecs/max(off.WipedSecs, 1e-9))
		}
		fmt.Fprintln(w)
	}
}
