package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// runConfig is the run subcommand's flags.
type runConfig struct {
	Spangle      string        // spangle binary; default "bin/spangle"
	Sequins      string        // a stripe/sequins binary to run on the same data; default none (skipped)
	Compressions []string      // the spangle scenario runs once per value compression; default none,s2,zstd
	Work         string        // dataset cache, logs, data dirs; default <user cache dir>/spangle-bench
	Gen          genParams     // the dataset; default defaultGenParams()
	Duration     time.Duration // each measured load; default 5s
	Rounds       int           // measured loads per scenario and connection count, each after a baseline load; the median counts; default 3
	StartRounds  int           // starts of spangle and sequins on a fresh data dir; start to serving is their median; default 3
	Warmup       time.Duration // one load before each scenario's, at the most connections, not measured; 0 skips; default 2s
	Conns        []int         // connection counts; default 1,50
	Zipf         bool          // also load spangle (and https) with Zipf-distributed keys; default true
	HotCache     string        // spangle's [storage] hot_cache in the spangle and https scenarios; default "": spangle's default
	SpangleTOML  string        // appended to the spangle scenario's config: tables other than [storage]
	BuildTimeout time.Duration // from start to ACTIVE; default 10m
	JSON         string        // also write the results there; default none
	Scenarios    []string      // which scenarios run, in scenarios' order; default all

	// The cluster scenario (cluster.go).
	ClusterRecords  int64         // its dataset's records; default 500,000
	ClusterConns    int           // wrk connections to the one node; default 50
	ClusterConverge time.Duration // the nodes' time_to_converge; default 2s
	ClusterRounds   int           // rounds of a proxied and a local load; the ratio is their median; default 5
	// Its upgrades under load (upgrades.go).
	ClusterUpgrades int           // successive versions switched to under load; 0 skips; default 20
	UpgradeRecords  int64         // records of each; default 20,000 (at most ClusterRecords)
	UpgradeReaders  int           // reading goroutines per node; default 2
	UpgradeTimeout  time.Duration // from _SUCCESS to every node serving an upgrade; default 1m

	// The publish scenario (publish.go).
	PublishRounds int // rounds of a raw Put and a publish; default 3

	// The peercopy scenario (peercopy.go).
	PeerCopyRecords int64 // its dataset's records; default 2,000,000
	PeerCopyConns   int   // wrk connections to node 1; default 10
	// PeerCopyWindow is each load of node 1, at rest and from node 3's
	// join on; default 2s.
	PeerCopyWindow time.Duration
	// PeerCopyBandwidths are the senders' [cluster] peer_copy_bandwidth
	// of the build once runs, one run each after the run with build once
	// off; default none: one run at spangle's default.
	PeerCopyBandwidths []string
}

func (c *runConfig) register(fs *flag.FlagSet) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	c.Gen = defaultGenParams()
	c.Conns = []int{1, 50}
	fs.StringVar(&c.Spangle, "spangle", "bin/spangle", "`path` of the spangle binary to measure")
	c.Compressions = []string{"none", "s2", "zstd", "s2-blocks"}
	fs.Var((*stringList)(&c.Compressions), "compressions", "comma-separated value `compressions` the spangle scenario runs with, one run each: none, s2, zstd, s2-blocks")
	fs.StringVar(&c.Sequins, "sequins", "", "`path` of a stripe/sequins binary to run on the same data, for the ratios against it (none: skipped)")
	fs.StringVar(&c.Work, "work", filepath.Join(cache, "spangle-bench"), "work `dir`: cached dataset, logs, wrk script, data dirs")
	c.Gen.register(fs)
	fs.DurationVar(&c.Duration, "duration", 5*time.Second, "length of each measured load (whole seconds)")
	fs.IntVar(&c.StartRounds, "start-rounds", 3, "starts of spangle and sequins, each on a fresh data dir after the dataset is read back; start to serving is their median")
	fs.IntVar(&c.Rounds, "rounds", 3, "measured loads per scenario and connection count, each just after a baseline load at the same connections (when the baseline runs); the report gives the median round")
	fs.DurationVar(&c.Warmup, "warmup", 2*time.Second, "unmeasured load before each scenario's loads; 0 skips it")
	fs.Var((*intList)(&c.Conns), "conns", "comma-separated connection `counts`")
	fs.StringVar(&c.HotCache, "hot-cache", "", "spangle's [storage] hot_cache `size` in the spangle and https scenarios (\"0\": off; empty: spangle's default)")
	fs.StringVar(&c.SpangleTOML, "spangle-toml", "", "TOML appended to the spangle scenario's config, tables other than [storage] (such as `'[runtime]\\ngc_percent = 100'`; \\n is a line break)")
	fs.BoolVar(&c.Zipf, "zipf", true, fmt.Sprintf("also load the spangle and https scenarios with keys of a Zipf distribution (exponent %g), paired with the baseline as the uniform loads", zipfTheta))
	fs.DurationVar(&c.BuildTimeout, "build-timeout", 10*time.Minute, "how long spangle may take to make the version ACTIVE")
	fs.StringVar(&c.JSON, "json", "", "also write the results as JSON to `file`")
	c.Scenarios = scenarioNames()
	fs.Var((*stringList)(&c.Scenarios), "scenarios", "comma-separated `names` of the scenarios to run: "+strings.Join(scenarioNames(), ", "))
	fs.Int64Var(&c.ClusterRecords, "cluster-records", 500_000, "records of the cluster scenario's dataset (smaller, to fit three nodes on a small machine)")
	fs.IntVar(&c.ClusterConns, "cluster-conns", 50, "wrk connections in the cluster scenario's loads")
	fs.DurationVar(&c.ClusterConverge, "cluster-converge", 2*time.Second, "the cluster nodes' time_to_converge")
	fs.IntVar(&c.ClusterRounds, "cluster-rounds", 5, "rounds of a proxied and a local load in the cluster scenario; the proxied/local ratio is their median")
	fs.IntVar(&c.ClusterUpgrades, "cluster-upgrades", 20, "versions the cluster scenario switches through under load (0 skips the step)")
	fs.Int64Var(&c.UpgradeRecords, "upgrade-records", 20_000, "records of each upgrade's version")
	fs.Int64Var(&c.PeerCopyRecords, "peercopy-records", 2_000_000, "records of the peercopy scenario's dataset")
	fs.IntVar(&c.PeerCopyConns, "peercopy-conns", 10, "wrk connections to node 1 in the peercopy scenario")
	fs.Var((*stringList)(&c.PeerCopyBandwidths), "peercopy-bandwidths", "comma-separated `sizes` of [cluster] peer_copy_bandwidth (\"256MiB\"): the peercopy scenario's build once run is made once with each, paired with the same run's build once off (none: once, at spangle's default)")
	fs.DurationVar(&c.PeerCopyWindow, "peercopy-window", 2*time.Second, "each load of node 1 in the peercopy scenario: at rest, and from the wiped node's join on (whole seconds)")
	fs.IntVar(&c.UpgradeReaders, "upgrade-readers", 2, "reading goroutines per node during the upgrades")
	fs.DurationVar(&c.UpgradeTimeout, "upgrade-timeout", time.Minute, "how long every node may take to serve an upgrade")
	fs.IntVar(&c.PublishRounds, "publish-rounds", 3, "rounds of a raw Object Store Put and a spangle publish in the publish scenario")
}

// Validate reports settings the run cannot use.
func (c *runConfig) Validate() error {
	if c.Duration < time.Second || (c.Warmup != 0 && c.Warmup < time.Second) {
		return errors.New("run: --duration and --warmup are whole seconds, at least 1s (--warmup 0 skips)")
	}
	if c.Rounds < 1 || c.Rounds > 99 || c.StartRounds < 1 || c.StartRounds > 99 {
		return errors.New("run: --rounds and --start-rounds must be in [1, 99]")
	}
	if len(c.Conns) == 0 || c.BuildTimeout <= 0 {
		return errors.New("run: --conns and --build-timeout must be set")
	}
	for _, n := range c.Scenarios {
		if !slices.Contains(scenarioNames(), n) {
			return fmt.Errorf("run: unknown scenario %q (want some of %s)", n, strings.Join(scenarioNames(), ","))
		}
	}
	if len(c.Scenarios) == 0 {
		return errors.New("run: --scenarios is empty")
	}
	for _, comp := range c.Compressions {
		if !slices.Contains([]string{"none", "s2", "zstd", "s2-blocks"}, comp) {
			return fmt.Errorf("run: unknown compression %q (want some of none,s2,zstd,s2-blocks)", comp)
		}
	}
	if slices.Contains(c.Scenarios, "spangle") && len(c.Compressions) == 0 {
		return errors.New("run: --compressions is empty")
	}
	if slices.Contains(c.Scenarios, "cluster") {
		g := c.Gen
		g.Records = c.ClusterRecords
		if err := g.Validate(); err != nil {
			return fmt.Errorf("run: --cluster-records: %w", err)
		}
		if c.ClusterConns < 1 || c.ClusterConverge <= 0 || c.ClusterRounds < 1 || c.ClusterRounds > 99 {
			return errors.New("run: --cluster-conns and --cluster-converge must be positive, --cluster-rounds in [1, 99]")
		}
		if c.ClusterUpgrades < 0 || c.ClusterUpgrades > 99 {
			return errors.New("run: --cluster-upgrades must be in [0, 99]")
		}
		if c.ClusterUpgrades > 0 && (c.UpgradeRecords < 1 || c.UpgradeRecords > c.ClusterRecords || c.UpgradeReaders < 1 || c.UpgradeTimeout <= 0) {
			return errors.New("run: --upgrade-records must be in [1, --cluster-records], --upgrade-readers and --upgrade-timeout positive")
		}
	}
	if slices.Contains(c.Scenarios, "peercopy") && (c.PeerCopyRecords < 1 || c.PeerCopyConns < 1 || c.PeerCopyWindow < time.Second || c.PeerCopyWindow%time.Second != 0) {
		return errors.New("run: --peercopy-records and --peercopy-conns must be at least 1, --peercopy-window whole seconds, at least 1s")
	}
	for _, bw := range c.PeerCopyBandwidths {
		if strings.ContainsAny(bw, "\"\\\n") {
			return fmt.Errorf("run: --peercopy-bandwidths: %q is not a size", bw)
		}
	}
	if slices.Contains(c.Scenarios, "publish") && c.PublishRounds < 1 {
		return errors.New("run: --publish-rounds must be at least 1")
	}
	return c.Gen.Validate()
}

// reproduce is the command line that repeats a run with fs's settings, the
// work dir and JSON file aside.
func reproduce(fs *flag.FlagSet) string {
	args := []string{"go run ./cmd/spangle-bench run"}
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "work" || f.Name == "json" {
			return
		}
		args = append(args, "--"+f.Name+"="+shellQuote(f.Value.String()))
	})
	return strings.Join(args, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./,:=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func runCmd(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var cfg runConfig
	cfg.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("run: unexpected arguments %q", fs.Args())
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	wrk, err := lookWrk()
	if err != nil {
		return err
	}
	spangle, err := filepath.Abs(cfg.Spangle)
	if err != nil {
		return err
	}
	if st, err := os.Stat(spangle); err != nil || st.IsDir() {
		return fmt.Errorf("run: no spangle binary at %s (build it: go build -o bin/spangle ./cmd/spangle)", cfg.Spangle)
	}
	sequins := ""
	if cfg.Sequins != "" {
		if sequins, err = filepath.Abs(cfg.Sequins); err != nil {
			return err
		}
		if st, err := os.Stat(sequins); err != nil || st.IsDir() {
			return fmt.Errorf("run: no sequins binary at %s", cfg.Sequins)
		}
	}
	r := &report{Started: time.Now(), Command: reproduce(fs), Machine: machineInfo(spangle, wrk), Dataset: cfg.Gen}
	cfg.Sequins = sequins
	cfg.Spangle = spangle
	if cfg.Work, err = filepath.Abs(cfg.Work); err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.Work, 0o755); err != nil {
		return err
	}
	// Data dirs are removed after each run; any left were left by a run
	// that was killed.
	stale, _ := filepath.Glob(filepath.Join(cfg.Work, dataDirPrefix+"*"))
	for _, d := range stale {
		log.Info("removing a data dir left by an earlier run", "dir", d)
		if err := os.RemoveAll(d); err != nil {
			return err
		}
	}

	b := &bench{cfg: cfg, log: log, source: filepath.Join(cfg.Work, "source"), wrk: wrk, h2load: lookH2load(),
		script: filepath.Join(cfg.Work, "bench.lua"), checkScript: filepath.Join(cfg.Work, "check.lua"),
		zipfScript: filepath.Join(cfg.Work, "zipf.lua")}
	log.Info("generating dataset", "dir", b.source, "records", cfg.Gen.Records)
	t := time.Now()
	if r.GenCached, err = generate(b.source, cfg.Gen); err != nil {
		return err
	}
	r.GenSecs = time.Since(t).Seconds()
	log.Info("dataset ready", "cached", r.GenCached, "took", time.Since(t).Round(time.Millisecond))
	for path, strict := range map[string]bool{b.script: false, b.checkScript: true} {
		if err := writeWrkScript(path, cfg.Gen.Records, cfg.Gen.KeySize, "/"+cfg.Gen.DB+"/", strict); err != nil {
			return err
		}
	}
	if err := writeZipfScript(b.zipfScript, cfg.Gen.Records, cfg.Gen.KeySize, "/"+cfg.Gen.DB+"/"); err != nil {
		return err
	}

	if slices.Contains(cfg.Scenarios, baselineName) {
		if b.base, err = startBaseline(ctx, b, baselineName); err != nil {
			return fmt.Errorf("baseline: %w", err)
		}
		defer func() {
			if serr := b.base.c.stop(); serr != nil {
				log.Error("stopping the baseline", "err", serr)
			}
		}()
	}
	for _, sc := range scenarios() {
		if !slices.Contains(cfg.Scenarios, sc.name) {
			continue
		}
		variants := []string{""}
		if sc.name == "spangle" {
			variants = cfg.Compressions
		}
		for _, v := range variants {
			if err := settle(b.source); err != nil {
				return err
			}
			b.compression = v
			name := sc.name
			if v != "" {
				name += "-" + v
			}
			log.Info("scenario", "name", name)
			res, err := sc.run(ctx, b)
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			if err != nil {
				log.Error("scenario failed", "name", name, "err", err)
				res.Problems = append(res.Problems, err.Error())
			}
			res.Name = name
			for i := range res.Loads {
				// "spangle" and "spangle zipf" become "spangle-s2-blocks"
				// and "spangle-s2-blocks zipf".
				if rest, ok := strings.CutPrefix(res.Loads[i].Scenario, sc.name); ok && (rest == "" || rest[0] == ' ') {
					res.Loads[i].Scenario = name + rest
				}
			}
			r.Scenarios = append(r.Scenarios, res)
		}
	}
	r.finish()
	fmt.Println()
	r.print(os.Stdout)
	if cfg.JSON != "" {
		if err := r.writeJSON(cfg.JSON); err != nil {
			return err
		}
	}
	if len(r.Failures) > 0 {
		return fmt.Errorf("run failed: %d problems (see above)", len(r.Failures))
	}
	return nil
}

// stringList is a flag.Value of comma-separated names.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(s string) error {
	*l = nil
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			*l = append(*l, f)
		}
	}
	return nil
}

// intList is a flag.Value of comma-separated positive integers.
type intList []int

func (l *intList) String() string {
	var s []string
	for _, n := range *l {
		s = append(s, strconv.Itoa(n))
	}
	return strings.Join(s, ",")
}

func (l *intList) Set(s string) error {
	*l = nil
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("bad count %q", f)
		}
		*l = append(*l, n)
	}
	return nil
}
