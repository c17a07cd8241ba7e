package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/spangledb/spangle/edge/client"
	"github.com/spangledb/spangle/kvwatch/names"
	"github.com/spangledb/spangle/kvwatch/natsconn"
)

// The scale subcommand: N `spangle serve` processes in cluster mode
// against a three-server NATS JetStream cluster that the harness runs in
// its own process (with monitoring endpoints), D dbs of P tiny partitions,
// replication 2. For each N in --nodes it measures, in one run:
//
//  1. start: from the first node started to every node serving every db;
//  2. steady state (no lookups) over --steady: KV writes per second (the
//     growth of the buckets' streams, from /jsz), messages delivered to
//     clients per second (/connz), and each node's CPU and RSS;
//  3. a client (edge/client over NATS) from Start to its first answer;
//  4. publish: from the last _SUCCESS of a new version of every db to every
//     node serving it;
//  5. kill -9 of --kill nodes: until the survivors' status no longer lists
//     them (membership) and until no partition of any db is short of
//     replication among the survivors (healing, after --heal-after);
//  6. a restart of all three NATS servers: from their restart until every
//     surviving node is listed again by every other one.
//
// The figures go to a table (one row per N, so the growth law shows) and,
// with --json, to a file.

// scaleConfig is the scale subcommand's flags.
type scaleConfig struct {
	Spangle     string
	Work        string
	Nodes       []int         // cluster sizes measured, in order; default 10,25,50,100
	DBs         int           // default 5
	Partitions  int           // per db; default 256
	Records     int64         // per db and version; default 4 per partition
	Replication int           // default 2
	Kill        int           // nodes killed with SIGKILL; default 10 (at most N/4)
	Steady      time.Duration // steady-state window; default 20s
	Settle      time.Duration // wait before the steady window; default 5s
	HealAfter   time.Duration // the nodes' heal_after; default 10s
	EntryTTL    time.Duration // the nodes' [nats] entry_ttl; default 10s
	Refresh     time.Duration // the nodes' refresh_period; default 1s
	Timeout     time.Duration // each phase's limit; default 5m
	JSON        string
}

func (c *scaleConfig) register(fs *flag.FlagSet) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	c.Nodes = []int{10, 25, 50, 100}
	fs.StringVar(&c.Spangle, "spangle", "bin/spangle", "`path` of the spangle binary")
	fs.StringVar(&c.Work, "work", filepath.Join(cache, "spangle-bench", "scale"), "work `dir`: sources, data dirs, logs")
	fs.Var((*intList)(&c.Nodes), "nodes", "comma-separated cluster `sizes` to measure, in order")
	fs.IntVar(&c.DBs, "dbs", 5, "number of dbs")
	fs.IntVar(&c.Partitions, "partitions", 256, "partitions (source files) per db version")
	fs.Int64Var(&c.Records, "records", 0, "records per db version (default 4 per partition)")
	fs.IntVar(&c.Replication, "replication", 2, "the nodes' [sharding] replication")
	fs.IntVar(&c.Kill, "kill", 10, "nodes killed with SIGKILL in the healing phase (at most a quarter of the nodes)")
	fs.DurationVar(&c.Steady, "steady", 20*time.Second, "steady-state measuring window")
	fs.DurationVar(&c.Settle, "settle", 5*time.Second, "pause before the steady window, after every node serves")
	fs.DurationVar(&c.HealAfter, "heal-after", 10*time.Second, "the nodes' heal_after")
	fs.DurationVar(&c.EntryTTL, "entry-ttl", 10*time.Second, "the nodes' [nats] entry_ttl")
	fs.DurationVar(&c.Refresh, "refresh", time.Second, "the nodes' refresh_period")
	fs.DurationVar(&c.Timeout, "timeout", 5*time.Minute, "limit of each phase")
	fs.StringVar(&c.JSON, "json", "", "also write the results as JSON to `file`")
}

func (c *scaleConfig) Validate() error {
	if len(c.Nodes) == 0 || c.DBs < 1 || c.Partitions < 1 || c.Replication < 1 {
		return errors.New("scale: --nodes, --dbs, --partitions and --replication must be positive")
	}
	for _, n := range c.Nodes {
		if n < c.Replication || n > 1000 {
			return fmt.Errorf("scale: %d nodes: want between --replication and 1000", n)
		}
	}
	if c.Steady < time.Second || c.Timeout <= 0 || c.HealAfter < time.Second || c.EntryTTL < time.Second {
		return errors.New("scale: --steady, --heal-after and --entry-ttl are at least 1s, --timeout positive")
	}
	return nil
}

// scaleResult holds one cluster size's figures.
type scaleResult struct {
	Nodes      int `json:"nodes"`
	DBs        int `json:"dbs"`
	Partitions int `json:"partitions"`

	StartSecs float64 `json:"start_to_serving_seconds"`
	// Steady state.
	KVWritesPerSec   float64 `json:"kv_writes_per_second"`
	DeliveredPerSec  float64 `json:"messages_delivered_per_second"`
	NATSInMsgsPerSec float64 `json:"nats_in_msgs_per_second"` // all servers, routes included
	CPUPctMean       float64 `json:"node_cpu_percent_mean"`   // of one core
	CPUPctMax        float64 `json:"node_cpu_percent_max"`
	RSSMiBMean       float64 `json:"node_rss_mib_mean"`
	RSSMiBMax        float64 `json:"node_rss_mib_max"`

	ClientStartMs   float64 `json:"client_start_ms"`
	PublishSecs     float64 `json:"publish_to_all_serving_seconds"`
	Killed          int     `json:"killed"`
	MembershipSecs  float64 `json:"kill_to_membership_seconds"`
	HealSecs        float64 `json:"kill_to_healed_seconds"`
	NATSRestartSecs float64 `json:"nats_restart_to_converged_seconds"`

	Problems []string `json:"problems,omitempty"`
}

// scaleReport is what the scale subcommand prints and saves.
type scaleReport struct {
	Machine machine       `json:"machine"`
	Config  scaleSettings `json:"config"`
	Results []scaleResult `json:"results"`
}

type scaleSettings struct {
	Replication  int     `json:"replication"`
	Kill         int     `json:"kill"`
	SteadySecs   float64 `json:"steady_seconds"`
	HealAfterSec float64 `json:"heal_after_seconds"`
	EntryTTLSecs float64 `json:"entry_ttl_seconds"`
	RefreshSecs  float64 `json:"refresh_period_seconds"`
}

func scaleCmd(ctx context.Context, log *slog.Logger, args []string) error {
	var cfg scaleConfig
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	cfg.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("scale: unexpected arguments %q", fs.Args())
	}
	if cfg.Records == 0 {
		cfg.Records = int64(cfg.Partitions) * 4
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	// The nodes run in their own directories: every path they are given
	// must be absolute.
	var err error
	if cfg.Spangle, err = filepath.Abs(cfg.Spangle); err != nil {
		return err
	}
	if cfg.Work, err = filepath.Abs(cfg.Work); err != nil {
		return err
	}
	if _, err := os.Stat(cfg.Spangle); err != nil {
		return fmt.Errorf("scale: the spangle binary: %w (make build)", err)
	}
	if err := raiseFileLimit(); err != nil {
		log.Warn("scale: could not raise the open-file limit", "err", err)
	}
	if err := os.MkdirAll(cfg.Work, 0o755); err != nil {
		return err
	}
	rep := scaleReport{
		Machine: machineInfo(cfg.Spangle, ""),
		Config: scaleSettings{Replication: cfg.Replication, Kill: cfg.Kill, SteadySecs: cfg.Steady.Seconds(),
			HealAfterSec: cfg.HealAfter.Seconds(), EntryTTLSecs: cfg.EntryTTL.Seconds(), RefreshSecs: cfg.Refresh.Seconds()},
	}
	var failed bool
	for _, n := range cfg.Nodes {
		log.Info("scale: measuring", "nodes", n, "dbs", cfg.DBs, "partitions", cfg.Partitions)
		r, err := runScale(ctx, log, cfg, n)
		if err != nil {
			r.Problems = append(r.Problems, err.Error())
		}
		if len(r.Problems) > 0 {
			failed = true
			log.Error("scale: problems", "nodes", n, "problems", r.Problems)
		}
		rep.Results = append(rep.Results, r)
		if ctx.Err() != nil {
			break
		}
	}
	rep.print(os.Stdout)
	if cfg.JSON != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(cfg.JSON, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if failed {
		return errors.New("scale: some measurements failed (see problems)")
	}
	return nil
}

// raiseFileLimit raises the soft open-file limit to the hard one; the
// nodes inherit it.
func raiseFileLimit() error {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return err
	}
	l.Cur = l.Max
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
}

// scaleRun is one cluster size's run: its NATS cluster, source and nodes.
type scaleRun struct {
	cfg    scaleConfig
	log    *slog.Logger
	dir    string
	source string
	nats   *natsCluster
	nodes  []*clusterNode
	dead   map[int]bool // node ids killed
	client *http.Client
	dbs    []string
}

const scaleCluster = "scale"

func runScale(ctx context.Context, log *slog.Logger, cfg scaleConfig, n int) (res scaleResult, err error) {
	res = scaleResult{Nodes: n, DBs: cfg.DBs, Partitions: cfg.Partitions}
	dir := filepath.Join(cfg.Work, "n"+strconv.Itoa(n))
	if err := os.RemoveAll(dir); err != nil {
		return res, err
	}
	r := &scaleRun{cfg: cfg, log: log, dir: dir, source: filepath.Join(dir, "source"), dead: map[int]bool{},
		client: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 2}}}
	for i := range cfg.DBs {
		r.dbs = append(r.dbs, fmt.Sprintf("db%d", i))
	}
	if err := r.writeVersion("1"); err != nil {
		return res, err
	}
	r.nats, err = startNATSCluster(filepath.Join(dir, "nats"))
	if err != nil {
		return res, err
	}
	defer r.nats.shutdown()
	defer r.stopNodes(&res)

	// 1. Start every node; every db served by every node.
	start := time.Now()
	if err := r.startNodes(n); err != nil {
		return res, err
	}
	if err := r.waitAllServe(ctx, "1"); err != nil {
		return res, fmt.Errorf("start: %w", err)
	}
	res.StartSecs = time.Since(start).Seconds()
	log.Info("scale: every node serves", "nodes", n, "took", time.Since(start).Round(time.Millisecond))

	// 2. Steady state.
	if err := sleepCtx(ctx, cfg.Settle); err != nil {
		return res, err
	}
	if err := r.steady(ctx, &res); err != nil {
		return res, fmt.Errorf("steady state: %w", err)
	}

	// 3. A client's start.
	if res.ClientStartMs, err = r.clientStart(ctx); err != nil {
		res.Problems = append(res.Problems, "client start: "+err.Error())
	}

	// 4. A new version of every db.
	if err := r.writeVersion("2"); err != nil {
		return res, err
	}
	start = time.Now() // the last _SUCCESS is written
	if err := r.waitAllServe(ctx, "2"); err != nil {
		return res, fmt.Errorf("publish: %w", err)
	}
	res.PublishSecs = time.Since(start).Seconds()
	log.Info("scale: every node serves version 2", "took", time.Since(start).Round(time.Millisecond))

	// 5. Kill some nodes.
	kill := min(cfg.Kill, n/4)
	if kill > 0 {
		if err := r.killAndHeal(ctx, kill, &res); err != nil {
			return res, fmt.Errorf("kill: %w", err)
		}
	}

	// 6. Restart the NATS cluster.
	if err := r.restartNATS(ctx, &res); err != nil {
		return res, fmt.Errorf("NATS restart: %w", err)
	}
	return res, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// writeVersion writes version v of every db: P files of tiny records,
// then each db's _SUCCESS, last.
func (r *scaleRun) writeVersion(v string) error {
	var dirs []string
	for _, db := range r.dbs {
		p := genParams{Format: genFormat, DB: db, Version: v, Records: r.cfg.Records, Files: r.cfg.Partitions,
			KeySize: 16, ValueSize: 32, Seed: 1}
		gen := filepath.Join(r.cfg.Work, "gen", db+"-"+v+"-"+strconv.Itoa(r.cfg.Partitions)+"-"+strconv.FormatInt(r.cfg.Records, 10))
		if _, err := generate(gen, p); err != nil {
			return err
		}
		vd, err := linkDataset(gen, r.source, p)
		if err != nil {
			return err
		}
		dirs = append(dirs, vd)
	}
	for _, vd := range dirs {
		if err := os.WriteFile(filepath.Join(vd, "_SUCCESS"), nil, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (r *scaleRun) startNodes(n int) error {
	urls := strings.Join(r.nats.clientURLs(), ",")
	for id := 1; id <= n; id++ {
		addr, err := freeAddr()
		if err != nil {
			return err
		}
		dir := filepath.Join(r.dir, "node"+strconv.Itoa(id))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		config := fmt.Sprintf(`require_success_file = true
refresh_period = %q
[nats]
url = %q
cluster_name = %q
replicas = 3
entry_ttl = %q
[sharding]
enabled = true
replication = %d
time_to_converge = "2s"
heal_after = %q
`, r.cfg.Refresh.String(), urls, scaleCluster, r.cfg.EntryTTL.String(), r.cfg.Replication, r.cfg.HealAfter.String())
		cfgPath := filepath.Join(dir, "spangle.toml")
		if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
			return err
		}
		name := "node " + strconv.Itoa(id)
		c, err := startChild(name, dir, filepath.Join(dir, "node.log"), r.cfg.Spangle,
			"serve", "--config", cfgPath, "--source", r.source, "--data-dir", filepath.Join(dir, "data"),
			"--bind", addr, "--log-format", "json", "--log-level", "warn")
		if err != nil {
			return err
		}
		r.nodes = append(r.nodes, &clusterNode{id: id, addr: addr, c: c})
	}
	return nil
}

func (r *scaleRun) stopNodes(res *scaleResult) {
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(16)
	for _, n := range r.nodes {
		g.Go(func() error {
			if err := n.c.stop(); err != nil && !r.dead[n.id] {
				mu.Lock()
				res.Problems = append(res.Problems, err.Error())
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
}

func (r *scaleRun) live() []*clusterNode {
	var l []*clusterNode
	for _, n := range r.nodes {
		if !r.dead[n.id] {
			l = append(l, n)
		}
	}
	return l
}

// waitAllServe polls every live node until it answers a GET of key 0 of
// every db with version v.
func (r *scaleRun) waitAllServe(ctx context.Context, v string) error {
	k := key(0, 16)
	return r.pollNodes(ctx, "to serve version "+v, func(n *clusterNode) error {
		for _, db := range r.dbs {
			resp, err := r.client.Get("http://" + n.addr + "/" + db + "/" + k)
			if err != nil {
				return fmt.Errorf("%w: %v", errNotYet, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if got := resp.Header.Get("X-Spangle-Version"); resp.StatusCode != http.StatusOK || got != v {
				return fmt.Errorf("%w: %s: %s version %q", errNotYet, db, resp.Status, got)
			}
		}
		return nil
	})
}

// pollNodes polls cond on every live node, a few at once, until it holds
// for all of them; a node that held it is not asked again.
func (r *scaleRun) pollNodes(ctx context.Context, what string, cond func(*clusterNode) error) error {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	pending := r.live()
	for {
		var mu sync.Mutex
		var still []*clusterNode
		var last error
		var g errgroup.Group
		g.SetLimit(8)
		for _, n := range pending {
			g.Go(func() error {
				if err := n.c.exited(); err != nil {
					return err
				}
				err := cond(n)
				if err == nil {
					return nil
				}
				if !errors.Is(err, errNotYet) {
					return fmt.Errorf("%s: %w", n.c.name, err)
				}
				mu.Lock()
				still = append(still, n)
				last = fmt.Errorf("%s: %w", n.c.name, err)
				mu.Unlock()
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
		if len(still) == 0 {
			return nil
		}
		pending = still
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d nodes %s: %w (last: %v)", len(pending), what, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// steady measures KV writes, deliveries and the nodes' CPU and RSS over
// the steady window.
func (r *scaleRun) steady(ctx context.Context, res *scaleResult) error {
	before, err := r.nats.sample(scaleCluster)
	if err != nil {
		return err
	}
	live := r.live()
	cpu0 := make([]time.Duration, len(live))
	for i, n := range live {
		s, err := sampleCPU(n.c.pid())
		if err != nil {
			return err
		}
		cpu0[i] = s.proc
	}
	start := time.Now()
	if err := sleepCtx(ctx, r.cfg.Steady); err != nil {
		return err
	}
	wall := time.Since(start)
	after, err := r.nats.sample(scaleCluster)
	if err != nil {
		return err
	}
	secs := wall.Seconds()
	res.KVWritesPerSec = float64(after.kvSeq-before.kvSeq) / secs
	res.DeliveredPerSec = float64(after.clientOut-before.clientOut) / secs
	res.NATSInMsgsPerSec = float64(after.inMsgs-before.inMsgs) / secs
	var cpuSum, rssSum float64
	for i, n := range live {
		s, err := sampleCPU(n.c.pid())
		if err != nil {
			return err
		}
		pct := 100 * (s.proc - cpu0[i]).Seconds() / secs
		rss, err := memKiB(n.c.pid(), "VmRSS")
		if err != nil {
			return err
		}
		mib := float64(rss) / 1024
		cpuSum += pct
		rssSum += mib
		res.CPUPctMax = max(res.CPUPctMax, pct)
		res.RSSMiBMax = max(res.RSSMiBMax, mib)
	}
	res.CPUPctMean = cpuSum / float64(len(live))
	res.RSSMiBMean = rssSum / float64(len(live))
	r.log.Info("scale: steady state", "nodes", len(live), "kv_writes_per_s", int(res.KVWritesPerSec),
		"delivered_per_s", int(res.DeliveredPerSec), "cpu_pct_mean", fmt.Sprintf("%.2f", res.CPUPctMean),
		"rss_mib_mean", fmt.Sprintf("%.1f", res.RSSMiBMean))
	return nil
}

// clientStart times a NATS client from New to its first answer, in ms.
func (r *scaleRun) clientStart(ctx context.Context) (float64, error) {
	nc, err := natsconn.Connect(strings.Join(r.nats.clientURLs(), ","), natsconn.Options{Name: "spangle-bench"})
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	cfg := client.DefaultConfig()
	cfg.Conn = nc
	cfg.ClusterName = scaleCluster
	start := time.Now()
	c, err := client.New(cfg)
	if err != nil {
		return 0, err
	}
	if err := c.Start(); err != nil {
		return 0, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = c.Close(sctx)
	}()
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	res, err := c.Get(ctx, r.dbs[0], []byte(key(0, 16)))
	if err != nil {
		return 0, err
	}
	if !res.Found {
		return 0, errors.New("key 0 not found")
	}
	return float64(time.Since(start).Microseconds()) / 1000, nil
}

// dbStatus reads a node's status of db's version v.
func (r *scaleRun) dbStatus(addr, db, v string) (scaleVersionStatus, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/"+db+"/", nil)
	if err != nil {
		return scaleVersionStatus{}, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return scaleVersionStatus{}, fmt.Errorf("%w: %v", errNotYet, err)
	}
	defer resp.Body.Close()
	var st struct {
		Versions map[string]scaleVersionStatus `json:"versions"`
	}
	if resp.StatusCode != http.StatusOK {
		return scaleVersionStatus{}, fmt.Errorf("%w: %s", errNotYet, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return scaleVersionStatus{}, err
	}
	return st.Versions[v], nil
}

type scaleVersionStatus struct {
	Missing        int                        `json:"missing_partitions"`
	Underreplicate int                        `json:"underreplicated_partitions"`
	Nodes          map[string]json.RawMessage `json:"nodes"`
}

// killAndHeal kills n random nodes and times, as a sample of survivors
// sees it, when their status stops listing the killed nodes (membership)
// and when no partition of any db's version 2 is short of replication
// (healing); then every survivor is checked once.
func (r *scaleRun) killAndHeal(ctx context.Context, n int, res *scaleResult) error {
	rnd := rand.New(rand.NewPCG(uint64(len(r.nodes)), 7))
	perm := rnd.Perm(len(r.nodes))
	var killed []string
	for _, i := range perm[:n] {
		r.dead[r.nodes[i].id] = true
		killed = append(killed, r.nodes[i].addr)
	}
	start := time.Now()
	for _, i := range perm[:n] {
		if err := r.nodes[i].c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			return err
		}
	}
	res.Killed = n
	live := r.live()
	want := len(live)
	sample := make([]*clusterNode, 0, scaleSample)
	for i := 0; i < len(live) && len(sample) < scaleSample; i += max(1, len(live)/scaleSample) {
		sample = append(sample, live[i])
	}
	// check reports whether nd's status no longer lists a killed node
	// (membership) and whether it shows no partition short (healed).
	check := func(nd *clusterNode) (member, healed bool, err error) {
		member, healed = true, true
		for _, db := range r.dbs {
			vs, err := r.dbStatus(nd.addr, db, "2")
			if errors.Is(err, errNotYet) {
				return false, false, nil
			}
			if err != nil {
				return false, false, err
			}
			for _, k := range killed {
				if _, ok := vs.Nodes[k]; ok {
					member = false
				}
			}
			if len(vs.Nodes) > want {
				member = false
			}
			if vs.Missing > 0 || vs.Underreplicate > 0 {
				healed = false
			}
		}
		return member, healed, nil
	}
	deadline := time.Now().Add(r.cfg.Timeout)
	for res.HealSecs == 0 || res.MembershipSecs == 0 {
		allMember, allHealed := true, true
		for _, nd := range sample {
			if err := nd.c.exited(); err != nil {
				return err
			}
			m, h, err := check(nd)
			if err != nil {
				return err
			}
			allMember = allMember && m
			allHealed = allHealed && h && m
		}
		since := time.Since(start).Seconds()
		if allMember && res.MembershipSecs == 0 {
			res.MembershipSecs = since
		}
		if allHealed && res.HealSecs == 0 {
			res.HealSecs = since
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the killed nodes not dropped (%v) or not healed (%v) after %v", allMember, allHealed, r.cfg.Timeout)
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	r.log.Info("scale: killed nodes dropped and healed", "killed", n,
		"membership_s", fmt.Sprintf("%.1f", res.MembershipSecs), "healed_s", fmt.Sprintf("%.1f", res.HealSecs))
	// Every survivor agrees.
	return r.pollNodes(ctx, "to agree on the healed map", func(nd *clusterNode) error {
		m, h, err := check(nd)
		if err != nil {
			return err
		}
		if !m || !h {
			return fmt.Errorf("%w: membership %v, healed %v", errNotYet, m, h)
		}
		return nil
	})
}

// scaleSample is how many survivors the kill phase polls for its timings.
const scaleSample = 5

// restartNATS shuts the three NATS servers down for longer than the
// nodes' entry TTL (so their membership entries expire), starts them again
// on the same ports and store dirs, and times until the nodes bucket holds
// every survivor's entry again and every survivor's status lists every
// survivor.
func (r *scaleRun) restartNATS(ctx context.Context, res *scaleResult) error {
	r.nats.shutdown()
	if err := sleepCtx(ctx, r.cfg.EntryTTL+2*time.Second); err != nil {
		return err
	}
	start := time.Now()
	if err := r.nats.restart(); err != nil {
		return err
	}
	o := natsconn.Options{Name: "spangle-bench"}
	nc, err := natsconn.Connect(strings.Join(r.nats.clientURLs(), ","), o)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := natsconn.JetStream(nc, o)
	if err != nil {
		return err
	}
	want := len(r.live())
	deadline := time.Now().Add(r.cfg.Timeout)
	for {
		n, err := countKeys(ctx, js, names.KVBucket(scaleCluster, names.Nodes))
		if err == nil && n == want {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the nodes bucket holds %d entries, want %d (%v)", n, want, err)
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	err = r.pollNodes(ctx, "to converge after the NATS restart", func(nd *clusterNode) error {
		for _, db := range r.dbs {
			vs, err := r.dbStatus(nd.addr, db, "2")
			if err != nil {
				return err
			}
			if len(vs.Nodes) != want {
				return fmt.Errorf("%w: %s lists %d nodes, want %d", errNotYet, db, len(vs.Nodes), want)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	res.NATSRestartSecs = time.Since(start).Seconds()
	r.log.Info("scale: converged after the NATS restart", "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// countKeys counts the keys of a KV bucket.
func countKeys(ctx context.Context, js jetstream.JetStream, bucket string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return 0, err
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = keys.Stop() }()
	n := 0
	for range keys.Keys() {
		n++
	}
	return n, nil
}

func (rep *scaleReport) print(w io.Writer) {
	fmt.Fprintf(w, "\nspangle-bench scale: %d dbs × %d partitions, replication %d, steady window %.0fs, heal_after %.0fs, entry_ttl %.0fs (%s)\n\n",
		firstOr(rep.Results, func(r scaleResult) int { return r.DBs }), firstOr(rep.Results, func(r scaleResult) int { return r.Partitions }),
		rep.Config.Replication, rep.Config.SteadySecs, rep.Config.HealAfterSec, rep.Config.EntryTTLSecs, fmt.Sprintf("%d CPUs", rep.Machine.CPUs))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "nodes\tstart s\tKV writes/s\tdelivered/s\tCPU % mean\tCPU % max\tRSS MiB mean\tRSS MiB max\tclient ms\tpublish s\tkilled\tmembership s\thealed s\tNATS restart s\t")
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "%d\t%.1f\t%.1f\t%.0f\t%.2f\t%.2f\t%.1f\t%.1f\t%.1f\t%.1f\t%d\t%.1f\t%.1f\t%.1f\t\n",
			r.Nodes, r.StartSecs, r.KVWritesPerSec, r.DeliveredPerSec, r.CPUPctMean, r.CPUPctMax, r.RSSMiBMean, r.RSSMiBMax,
			r.ClientStartMs, r.PublishSecs, r.Killed, r.MembershipSecs, r.HealSecs, r.NATSRestartSecs)
	}
	tw.Flush()
	for _, r := range rep.Results {
		for _, p := range r.Problems {
			fmt.Fprintf(w, "problem (%d nodes): %s\n", r.Nodes, p)
		}
	}
	// Growth: each figure's ratio to the smallest run's, beside the ratio of
	// node counts and its square.
	if len(rep.Results) > 1 {
		base := rep.Results[0]
		fmt.Fprintf(w, "\ngrowth against %d nodes (N ratio, N² ratio, then each figure's ratio):\n", base.Nodes)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "nodes\tN\tN²\tKV writes\tdelivered\tCPU mean\tRSS mean\tpublish\t")
		for _, r := range rep.Results[1:] {
			nr := float64(r.Nodes) / float64(base.Nodes)
			fmt.Fprintf(tw, "%d\t%.1f\t%.1f\t%s\t%s\t%s\t%s\t%s\t\n", r.Nodes, nr, nr*nr,
				ratio(r.KVWritesPerSec, base.KVWritesPerSec), ratio(r.DeliveredPerSec, base.DeliveredPerSec),
				ratio(r.CPUPctMean, base.CPUPctMean), ratio(r.RSSMiBMean, base.RSSMiBMean), ratio(r.PublishSecs, base.PublishSecs))
		}
		tw.Flush()
	}
}

func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", a/b)
}

func firstOr(rs []scaleResult, f func(scaleResult) int) int {
	if len(rs) == 0 {
		return 0
	}
	return f(rs[0])
}
