package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// pollInterval is how often readiness is polled; it bounds the resolution
// of the measured wall-clock build time.
const pollInterval = 10 * time.Millisecond

// bench is what every scenario is given. Scenarios run one after another.
type bench struct {
	cfg    runConfig
	log    *slog.Logger
	source string // the generated source root
	wrk    string // path of wrk
	h2load string // path of h2load (h2load.go); "": none, no HTTP/2 rows
	// The wrk scripts asking for the dataset's keys, lean and strict (see
	// wrkScript), and with a Zipf distribution (zipfScript).
	script, checkScript, zipfScript string
	// compression is the spangle scenario's value compression ("": the
	// default, none).
	compression string
	// base is the baseline, if it runs: every other scenario's loads are
	// paired with its.
	base *baselineServer
}

// A scenario starts what it measures, loads it, stops it, and returns its
// figures. It must stop everything it started before it returns, error or
// not. Adding one (a 3-node cluster with proxied GETs, NATS request-reply
// lookups) means writing its func and listing it in scenarios.
type scenario struct {
	name string
	run  func(ctx context.Context, b *bench) (scenarioResult, error)
}

// dataDirPrefix names the data dirs made in the work dir.
const dataDirPrefix = "data-"

// baselineName is the scenario every other one is compared with;
// headersName the baseline answering with spangle's headers.
const (
	baselineName = "baseline"
	headersName  = "headers"
)

// scenarios lists the scenarios in the order they run.
func scenarios() []scenario {
	return []scenario{
		{name: "spangle", run: runSpangle},
		{name: accessLogName, run: runAccessLog},
		{name: sequinsName, run: runSequins},
		{name: "cluster", run: runCluster},
		{name: "publish", run: runPublish},
		{name: "peercopy", run: runPeerCopy},
		{name: "delta", run: runDelta},
		{name: httpsName, run: runHTTPS},
		{name: headersName, run: runHeaders},
		{name: baselineName, run: runBaseline},
	}
}

// scenarioNames lists the scenarios' names in the order they run.
func scenarioNames() []string {
	var names []string
	for _, s := range scenarios() {
		names = append(names, s.name)
	}
	return names
}

// runSpangle builds the dataset with `spangle serve` on a fresh data dir,
// its values compressed as b.compression says, then loads it with GETs of
// random keys.
func runSpangle(ctx context.Context, b *bench) (res scenarioResult, err error) {
	return runSpangleWith(ctx, b, "spangle", b.compression, strings.ReplaceAll(b.cfg.SpangleTOML, `\n`, "\n"), b.cfg.Zipf)
}

// accessLogName is the scenario of spangle with its access log on.
const accessLogName = "access-log"

// accessLogFile is the access log of the access-log scenario, in the
// work dir (the children's working directory); removed after it.
const accessLogFile = "access.log"

// runAccessLog is runSpangle with [http] access_log on (the Combined Log
// Format, to a file of the work dir), with the default compression
// (s2-blocks) and uniform keys only: its rows' ratio to the baseline,
// beside those of spangle-s2-blocks, is the log's cost, and the notes
// say how many lines were dropped.
func runAccessLog(ctx context.Context, b *bench) (scenarioResult, error) {
	path := filepath.Join(b.cfg.Work, accessLogFile)
	os.Remove(path)
	defer os.Remove(path)
	res, err := runSpangleWith(ctx, b, accessLogName, "s2-blocks", fmt.Sprintf("[http]\naccess_log = %q\n", accessLogFile), false)
	if st, serr := os.Stat(path); serr == nil {
		res.Notes = append(res.Notes, fmt.Sprintf("the access log took %.1f MiB", float64(st.Size())/(1<<20)))
	} else if err == nil {
		res.Problems = append(res.Problems, "no access log was written: "+serr.Error())
	}
	return res, err
}

// runSpangleWith runs spangle as the spangle scenario does, named name,
// with compression ("": none), extra lines of config, and the Zipf load
// when zipf is set.
func runSpangleWith(ctx context.Context, b *bench, name, compression, extra string, zipf bool) (res scenarioResult, err error) {
	res.Name = name
	conf := fmt.Sprintf("[storage]\ncompression = %q\n%s%s", cmp.Or(compression, "none"), b.hotCacheLine(), extra)
	start := func() (*benchServer, error) {
		return b.startServer(name, b.cfg.Spangle, "spangle.toml", conf, b.serveArgs)
	}
	srv, starts, err := b.startServing(ctx, start)
	if srv != nil {
		defer srv.stop(&res)
	}
	if err != nil {
		return res, err
	}
	c, addr := srv.c, srv.addr
	build, err := waitActive(ctx, c, addr, b.cfg.Gen, b.cfg.BuildTimeout)
	if err != nil {
		return res, err
	}
	build.setServing(starts)
	if hwm, err := memKiB(c.pid(), "VmHWM"); err == nil {
		build.PeakRSSMiB = mib(hwm)
	}
	res.Build = &build
	switch {
	case build.Seconds == 0:
		res.Notes = append(res.Notes, "the status gives no build.records and build.duration_seconds; records/s is not known")
	case build.Records != b.cfg.Gen.Records:
		res.Problems = append(res.Problems, fmt.Sprintf("build reported %d records; the dataset has %d", build.Records, b.cfg.Gen.Records))
	}
	if note := headersDiffer(addr, b.cfg.Gen); note != "" {
		res.Notes = append(res.Notes, note)
	}
	b.log.Info("spangle active", "serving_median", time.Duration(build.ServingSeconds*float64(time.Second)).Round(time.Millisecond),
		"records_per_s", int64(build.RecordsPerSec), "peak_rss_mib", build.PeakRSSMiB)

	if err := b.load(ctx, &res, "http://"+addr+"/", c); err != nil {
		return res, err
	}
	if name == accessLogName {
		dropped, err := scrapeCounter("http://"+addr+"/metrics", "spangle_access_log_dropped_total")
		if err != nil {
			res.Problems = append(res.Problems, err.Error())
		}
		res.Notes = append(res.Notes, fmt.Sprintf("%.0f access log lines dropped", dropped))
	}
	if zipf {
		spec := loadSpec{base: b.base, script: b.zipfScript, warmup: b.zipfScript, name: res.Name + " zipf"}
		if err := b.loadWith(ctx, &res, "http://"+addr+"/", c, spec); err != nil {
			return res, err
		}
	}
	b.servingRSS(c.pid(), "http://"+addr+"/metrics", &res)
	return res, nil
}

// serveArgs is the command line of `spangle serve` in the spangle and
// https scenarios (startServer's args): the dataset, a data dir in dir,
// addr, and a free loopback address for its embedded NATS server, whose
// default (4222) another spangle on the machine may hold.
func (b *bench) serveArgs(dir, conf, addr string) []string {
	args := []string{"serve", "--config", conf, "--source", b.source, "--data-dir", filepath.Join(dir, "data"), "--bind", addr}
	if nats, err := freeAddr(); err == nil {
		args = append(args, "--nats-listen", nats)
	}
	return args
}

// hotCacheLine is the [storage] line of --hot-cache, or "".
func (b *bench) hotCacheLine() string {
	if b.cfg.HotCache == "" {
		return ""
	}
	return fmt.Sprintf("hot_cache = %q\n", b.cfg.HotCache)
}

// startServing starts a server with start --start-rounds times, each on
// a fresh data dir after the dataset is read back (settle; runCmd did it
// before the first), and waits until it serves the dataset's last key. It stops every server but the last,
// which it returns for the caller to load and stop (on error too, if
// started), with every start's seconds from process start to serving, in
// order.
func (b *bench) startServing(ctx context.Context, start func() (*benchServer, error)) (*benchServer, []float64, error) {
	var secs []float64
	for n := 1; ; n++ {
		if n > 1 {
			if err := settle(b.source); err != nil {
				return nil, nil, err
			}
		}
		srv, err := start()
		if err != nil {
			return nil, nil, err
		}
		s, err := waitServing(ctx, srv.c, "http://"+srv.addr, b.cfg.Gen, b.cfg.BuildTimeout)
		if err != nil {
			return srv, nil, fmt.Errorf("start %d: %w", n, err)
		}
		secs = append(secs, s)
		b.log.Info("serving", "start", n, "after", time.Duration(s*float64(time.Second)).Round(time.Millisecond))
		if n >= b.cfg.StartRounds {
			return srv, secs, nil
		}
		var res scenarioResult
		if srv.stop(&res); len(res.Problems) > 0 {
			return nil, nil, fmt.Errorf("start %d: %s", n, strings.Join(res.Problems, "; "))
		}
	}
}

// headersDiffer GETs a key of spangle at addr and says how the names of
// the headers it answers with differ from headersValue's (the headers
// scenario's), or "" if they do not.
func headersDiffer(addr string, p genParams) string {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + "/" + p.DB + "/" + key(0, p.KeySize))
	if err != nil {
		return "comparing headers with the headers scenario's: " + err.Error()
	}
	resp.Body.Close()
	var missing, extra []string
	for k := range resp.Header {
		if _, ok := headersValue[k]; !ok && k != "Date" {
			missing = append(missing, k)
		}
	}
	for k := range headersValue {
		if _, ok := resp.Header[k]; !ok {
			extra = append(extra, k)
		}
	}
	if len(missing)+len(extra) == 0 {
		return ""
	}
	slices.Sort(missing)
	slices.Sort(extra)
	return fmt.Sprintf("the headers scenario answers without %v and with %v that spangle does not send: update headersValue", missing, extra)
}

// benchServer is a server process started by startServer on a fresh data dir.
type benchServer struct {
	c    *child
	addr string // its HTTP listen address
	dir  string // its data dir, removed by stop
}

// startServer starts bin as name on a free loopback address with a fresh
// data dir holding the config file confName (conf its content); args
// returns the command line from the dir, the config's path and the
// address. Its log is <work>/<name>.log.
func (b *bench) startServer(name, bin, confName, conf string, args func(dir, conf, addr string) []string) (*benchServer, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(b.cfg.Work, dataDirPrefix)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, confName)
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c, err := startChild(name, b.cfg.Work, filepath.Join(b.cfg.Work, name+".log"), bin, args(dir, path, addr)...)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &benchServer{c: c, addr: addr, dir: dir}, nil
}

// stop stops the server, adding a failure to stop to res's problems, and
// removes its data dir.
func (s *benchServer) stop(res *scenarioResult) {
	if err := s.c.stop(); err != nil {
		res.Problems = append(res.Problems, err.Error())
	}
	os.RemoveAll(s.dir)
}

// baselineServer is the baseline (this program's baseline subcommand),
// started before the first scenario and kept until the last, so that every
// measured load is paired with a baseline load at the same connections,
// just before it.
type baselineServer struct {
	c   *child
	url string
	// loads are the baseline's loads by connections, in the order run.
	loads map[int][]loadResult
}

// startBaseline starts the baseline subcommand as name, with args, and
// waits for it to answer.
func startBaseline(ctx context.Context, b *bench, name string, args ...string) (*baselineServer, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args = append([]string{"baseline", "--bind", addr}, args...)
	c, err := startChild(name, b.cfg.Work, filepath.Join(b.cfg.Work, name+".log"), self, args...)
	if err != nil {
		return nil, err
	}
	url := "http://" + addr + "/"
	if slices.Contains(args, "--tls-cert") {
		url = "https://" + addr + "/"
	}
	client := benchClient(2 * time.Second)
	err = pollUntil(ctx, c, 10*time.Second, pollInterval, "baseline to listen", func() error {
		resp, err := client.Get(url)
		if err != nil {
			return fmt.Errorf("%w: %v", errNotYet, err)
		}
		resp.Body.Close()
		return nil
	})
	if err != nil {
		return nil, errors.Join(err, c.stop())
	}
	return &baselineServer{c: c, url: url, loads: map[int][]loadResult{}}, nil
}

// runHeaders loads the baseline subcommand answering with spangle's
// headers, precomputed, as spangle is loaded: the share of net/http's
// header work in spangle's distance to the baseline.
func runHeaders(ctx context.Context, b *bench) (res scenarioResult, err error) {
	res.Name = headersName
	h, err := startBaseline(ctx, b, headersName, "--headers")
	if err != nil {
		return res, err
	}
	defer func() {
		if serr := h.c.stop(); serr != nil {
			res.Problems = append(res.Problems, serr.Error())
		}
	}()
	if err := b.load(ctx, &res, h.url, h.c); err != nil {
		return res, err
	}
	b.servingRSS(h.c.pid(), "", &res)
	return res, nil
}

// runBaseline reports the baseline's loads: those paired with the other
// scenarios' (the median round at each connection count), or, when no
// other scenario loaded anything, its own.
func runBaseline(ctx context.Context, b *bench) (res scenarioResult, err error) {
	res.Name = baselineName
	if b.base == nil {
		return res, errors.New("baseline: not started")
	}
	if len(b.base.loads) == 0 {
		if err := b.load(ctx, &res, b.base.url, b.base.c); err != nil {
			return res, err
		}
	} else {
		for _, n := range b.cfg.Conns {
			if rounds := b.base.loads[n]; len(rounds) > 0 {
				res.Loads = append(res.Loads, medianLoad(rounds))
			}
		}
	}
	b.servingRSS(b.base.c.pid(), "", &res)
	return res, nil
}

// load warms url up with the strict script, then runs the lean one
// cfg.Rounds times at each of cfg.Conns, each round after a baseline load
// at the same connections (if the baseline runs), and adds the median
// round to res. It fails if c exits meanwhile.
func (b *bench) load(ctx context.Context, res *scenarioResult, url string, c *child) error {
	return b.loadWith(ctx, res, url, c, loadSpec{base: b.base, script: b.script, warmup: b.checkScript})
}

// loadSpec is what loadWith runs: the script of the measured loads, the
// warm-up's ("": none), the baseline each round is paired with (nil:
// none), and the name of the rows ("": the scenario's); with h2, the
// measured loads are h2load's (h2load.go: script unused).
type loadSpec struct {
	base           *baselineServer
	script, warmup string
	name           string
	h2             bool
}

// loadWith is load with spec's script, warm-up, baseline and row name.
// Only the loads of b.base with the uniform script are kept as the
// baseline's own rows.
func (b *bench) loadWith(ctx context.Context, res *scenarioResult, url string, c *child, spec loadSpec) error {
	name := cmp.Or(spec.name, res.Name)
	if b.cfg.Warmup > 0 && spec.warmup != "" {
		r := wrkRun{Script: spec.warmup, URL: url, Conns: slices.Max(b.cfg.Conns), Duration: b.cfg.Warmup}
		s, err := runWrk(ctx, b.wrk, r)
		if err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
		if n := s.Errors.Total(); n > 0 {
			res.Problems = append(res.Problems, fmt.Sprintf("%s warm-up at %d connections: %d failed requests (%s; status counts any but 200)", name, r.Conns, n, s.Errors))
		}
	}
	paired := spec.base != nil && spec.base.c != c
	record := spec.base == b.base && spec.script == b.script
	for _, n := range b.cfg.Conns {
		var rounds []loadResult
		for range b.cfg.Rounds {
			var base loadResult
			if paired {
				var err error
				if base, err = b.measure(ctx, spec.base.c.name, spec.base.url, spec.base.c, wrkRun{Script: spec.script, Conns: n, H2: spec.h2}); err != nil {
					return fmt.Errorf("baseline at %d connections: %w", n, err)
				}
				if record {
					spec.base.loads[n] = append(spec.base.loads[n], base)
				}
			}
			lr, err := b.measure(ctx, name, url, c, wrkRun{Script: spec.script, Conns: n, H2: spec.h2})
			if err != nil {
				return fmt.Errorf("at %d connections: %w", n, err)
			}
			if base.ReqPerSec > 0 {
				lr.VsBaseline = lr.ReqPerSec / base.ReqPerSec
				lr.BaseP50us, lr.BaseP99us = base.P50us, base.P99us
			}
			rounds = append(rounds, lr)
		}
		res.Loads = append(res.Loads, medianLoad(rounds))
	}
	return nil
}

// measure runs one measured load of url, r (its Script, Conns and H2)
// for the configured duration.
func (b *bench) measure(ctx context.Context, scenario, url string, c *child, r wrkRun) (loadResult, error) {
	r.URL, r.Duration = url, b.cfg.Duration
	before, cpuErr := sampleCPU(c.pid())
	start := time.Now()
	var s wrkStats
	var err error
	if r.H2 {
		s, err = runH2load(ctx, b.h2load, b.cfg.Work, b.cfg.Gen, r)
	} else {
		s, err = runWrk(ctx, b.wrk, r)
	}
	if err != nil {
		return loadResult{}, err
	}
	wall := time.Since(start)
	if err := c.exited(); err != nil {
		return loadResult{}, err
	}
	lr := newLoadResult(scenario, r, s)
	if after, err := sampleCPU(c.pid()); err == nil && cpuErr == nil {
		lr.setCPU(after.proc-before.proc, after.busy-before.busy-(after.proc-before.proc)-s.CPU, wall)
	}
	b.log.Info("load", "scenario", scenario, "conns", r.Conns, "req_per_s", int64(lr.ReqPerSec),
		"p50", s.P50, "p99", s.P99, "errors", s.Errors,
		"server_cpu_us_per_req", int64(lr.ServerCPUus), "other_cpu_pct", int64(lr.OtherCPUPct))
	return lr, nil
}

// medianLoad returns the median of rounds, loads at the same connections:
// by the ratio to their paired baseline if they have one, else by req/s.
// It carries every round's figure in Rounds, in the order run, and the
// sum of their errors.
func medianLoad(rounds []loadResult) loadResult {
	key := func(l loadResult) float64 { return l.ReqPerSec }
	if rounds[0].VsBaseline > 0 {
		key = func(l loadResult) float64 { return l.VsBaseline }
	}
	var figures []float64
	var errs loadErrors
	for _, l := range rounds {
		figures = append(figures, key(l))
		errs = errs.add(l.Errors)
	}
	sorted := slices.Clone(rounds)
	slices.SortStableFunc(sorted, func(a, b loadResult) int { return cmp.Compare(key(a), key(b)) })
	m := sorted[(len(sorted)-1)/2]
	m.Errors = errs
	if len(rounds) > 1 {
		m.Rounds = figures
	}
	return m
}

// versionState is the part of spangle's "/<db>/" status (node.DBStatus)
// that the harness reads. It is decoded here rather than imported, so the
// harness sees the binary only from outside, as a client would.
type versionState struct {
	Build *struct {
		Records     int64   `json:"records"`
		DurationSec float64 `json:"duration_seconds"`
	} `json:"build"`
	Nodes map[string]struct {
		State string `json:"state"`
		Error string `json:"error"`
	} `json:"nodes"`
}

// waitActive polls http://addr/<db>/ until every node lists the version as
// ACTIVE, and returns the build's figures; memory figures are left unset.
func waitActive(ctx context.Context, c *child, addr string, p genParams, timeout time.Duration) (buildResult, error) {
	url := "http://" + addr + "/" + p.DB + "/"
	client := &http.Client{Timeout: 5 * time.Second}
	var v versionState
	err := pollUntil(ctx, c, timeout, pollInterval, "version "+p.Version+" to be ACTIVE", func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Accept", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("%w: %v", errNotYet, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return fmt.Errorf("%w: %v", errNotYet, err)
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%w: GET %s: %s", errNotYet, url, resp.Status)
		}
		var st struct {
			Versions map[string]versionState `json:"versions"`
		}
		if err := json.Unmarshal(body, &st); err != nil {
			return fmt.Errorf("GET %s: %w (body starts %.80q)", url, err, body)
		}
		v = st.Versions[p.Version]
		if len(v.Nodes) == 0 {
			return fmt.Errorf("%w: no node lists version %s", errNotYet, p.Version)
		}
		for name, n := range v.Nodes {
			switch n.State {
			case "ACTIVE":
			case "ERROR":
				return fmt.Errorf("node %s: version %s failed: %s", name, p.Version, n.Error)
			default:
				return fmt.Errorf("%w: node %s: %s", errNotYet, name, n.State)
			}
		}
		return nil
	})
	if err != nil {
		return buildResult{}, err
	}
	r := buildResult{WallSeconds: time.Since(c.started).Seconds()}
	if v.Build != nil {
		r.Records, r.Seconds = v.Build.Records, v.Build.DurationSec
	}
	if r.Seconds > 0 {
		r.RecordsPerSec = float64(r.Records) / r.Seconds
	}
	return r, nil
}

func mib(kib int64) float64 { return float64(kib) / 1024 }

// servingRSS records a serving process's RSS, its anonymous and
// file-backed parts, and where they go (smaps, and spangle's /metrics at
// metricsURL unless it is empty), in res.
func (b *bench) servingRSS(pid int, metricsURL string, res *scenarioResult) {
	if rss, err := memKiB(pid, "VmRSS"); err == nil {
		res.ServingRSSMiB = mib(rss)
	}
	if anon, err := memKiB(pid, "RssAnon"); err == nil {
		res.ServingAnonMiB = mib(anon)
	}
	if file, err := memKiB(pid, "RssFile"); err == nil {
		res.ServingFileMiB = mib(file)
	}
	m, err := smapsSplit(pid, b.cfg.Work, res.Name)
	if err != nil {
		res.Notes = append(res.Notes, "no smaps: "+err.Error())
		return
	}
	if metricsURL != "" {
		if err := m.goMem(metricsURL); err != nil {
			res.Notes = append(res.Notes, "no runtime figures: "+err.Error())
		}
	}
	res.ServingMem = &m
}

// settle puts the dataset in the same state for every scenario: written
// back (a dataset generated just before would otherwise be flushed during
// the first scenario's build) and read once (in the page cache, as a
// source a node reads at start usually is).
func settle(root string) error {
	syncDisks()
	return filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(io.Discard, f)
		return err
	})
}

// scrapeCounter sums the samples of a counter in the exposition at url.
func scrapeCounter(url, name string) (float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return 0, err
	}
	sum, found := 0.0, false
	for line := range strings.SplitSeq(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q: %w", url, line, err)
		}
		sum, found = sum+v, true
	}
	if !found {
		return 0, fmt.Errorf("%s has no %s", url, name)
	}
	return sum, nil
}
