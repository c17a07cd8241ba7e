package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"syscall"
	"text/template"
	"time"

	"github.com/spangledb/spangle/plugins"
)

// The cluster scenario: three `spangle serve` processes on loopback (node 1
// embeds NATS, the others connect to it; sharding with replication 2), a
// version published once all three have joined, and wrk against node 1
// alone, once with keys whose partition node 1 does not hold (every request
// proxied) and once with keys it holds, in the same run.

// clusterNodes is the number of nodes the scenario starts.
const clusterNodes = 3

// clusterResult holds the cluster scenario's own figures.
type clusterResult struct {
	Records        int64   `json:"records"`          // the scenario's dataset, smaller than the others'
	ConvergeSecs   float64 `json:"converge_seconds"` // from _SUCCESS + SIGHUP to every node serving the version
	HeldPartitions []int   `json:"held_partitions"`  // by the loaded node
	NumPartitions  int     `json:"num_partitions"`
	ProxiedKeys    int     `json:"proxied_keys"` // in the proxied load's key list
	LocalKeys      int     `json:"local_keys"`
	// Proxied against local, both at the same connection count: the
	// median of the rounds' (--cluster-rounds), and each round's ratio.
	ThroughputRatio float64   `json:"proxied_vs_local"` // req/s
	P99DiffMs       float64   `json:"proxied_p99_minus_local_ms"`
	Ratios          []float64 `json:"proxied_vs_local_rounds"`
	// Upgrades under load (upgrades.go); nil if skipped.
	Upgrades *upgradeResult `json:"upgrades,omitempty"`
}

// clusterNode is one started node.
type clusterNode struct {
	id   int
	addr string // HTTP, host:port; also its name in the status
	c    *child
	dir  string // its config and data dir
	spec clusterSpec
}

func (n *clusterNode) configPath() string { return filepath.Join(n.dir, "spangle.toml") }
func (n *clusterNode) dataDir() string    { return filepath.Join(n.dir, "data") }

// startNode starts (or starts again) n's process on its configuration
// and data dir.
func (b *bench) startNode(n *clusterNode) error {
	name := n.spec.logs + " node " + strconv.Itoa(n.id)
	c, err := startChild(name, n.dir, filepath.Join(b.cfg.Work, fmt.Sprintf("%s-node%d.log", n.spec.logs, n.id)), b.cfg.Spangle,
		"serve", "--config", n.configPath(), "--source", n.spec.source, "--data-dir", n.dataDir(),
		"--bind", n.addr, "--log-format", "json")
	if err != nil {
		return err
	}
	n.c = c
	return nil
}

// clusterKeyLimit is the most keys a load's key list holds.
const clusterKeyLimit = 100_000

// splitKeys sorts record numbers [0, n) by the partition (among parts) of
// their keys under part: local if the partition is in held, proxied if
// neither it nor its alternate is (keys in between are left out). Each list
// is a uniform random sample of at most limit, in random order, fixed by
// seed.
func splitKeys(part plugins.Partitioner, n int64, keySize, parts int, held []int, limit int, seed uint64) (local, proxied []int64, err error) {
	in := make([]bool, parts)
	for _, p := range held {
		if p < 0 || p >= parts {
			return nil, nil, fmt.Errorf("held partition %d out of [0, %d)", p, parts)
		}
		in[p] = true
	}
	var buf []byte
	for i := range n {
		buf = fmt.Appendf(buf[:0], keyFormat(keySize), i)
		p, alt, err := part.Partition(buf, parts)
		if err != nil {
			return nil, nil, err
		}
		switch {
		case in[p]:
			local = append(local, i)
		case !in[alt]:
			proxied = append(proxied, i)
		}
	}
	r := rand.New(rand.NewPCG(seed, 2))
	sample := func(l []int64) []int64 {
		r.Shuffle(len(l), func(a, b int) { l[a], l[b] = l[b], l[a] })
		return l[:min(len(l), limit)]
	}
	return sample(local), sample(proxied), nil
}

// keyListScript is wrkScript's variant that asks for keys from a fixed
// list: Keys is the keys concatenated, each KeySize long.
var keyListScript = template.Must(template.New("keys.lua").Parse(`-- Written by spangle-bench; rewritten on every run.
local keys = "{{.Keys}}"
local ks = {{.KeySize}}
local n = {{.N}}
local prefix = "{{.Prefix}}"

function request()
  local j = math.random(0, n - 1) * ks
  return wrk.format("GET", prefix .. string.sub(keys, j + 1, j + ks))
end
` + wrkScriptCommon))

// writeKeyListScript writes a script asking for the records ids (keys of
// keySize) under prefix; strict as for writeWrkScript.
func writeKeyListScript(path string, ids []int64, keySize int, prefix string, strict bool) error {
	if len(ids) == 0 {
		return errors.New("no keys for the script")
	}
	var keys []byte
	for _, i := range ids {
		keys = fmt.Appendf(keys, keyFormat(keySize), i)
	}
	var b bytes.Buffer
	err := keyListScript.Execute(&b, map[string]any{
		"Keys": string(keys), "KeySize": keySize, "N": len(ids), "Prefix": prefix, "Marker": wrkMarker, "Strict": strict,
	})
	if err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// linkDataset makes dir/<db>/<version> hold the part files of the
// generated dataset at src (hard links, else copies), without _SUCCESS.
func linkDataset(src, dir string, p genParams) (versionDir string, err error) {
	from := filepath.Join(src, p.DB, p.Version)
	versionDir = filepath.Join(dir, p.DB, p.Version)
	if err := os.MkdirAll(versionDir, 0o755); err != nil {
		return "", err
	}
	parts, err := filepath.Glob(filepath.Join(from, "part-*"))
	if err != nil || len(parts) == 0 {
		return "", fmt.Errorf("no part files in %s (%v)", from, err)
	}
	for _, f := range parts {
		to := filepath.Join(versionDir, filepath.Base(f))
		if os.Link(f, to) == nil {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(to, b, 0o644); err != nil {
			return "", err
		}
	}
	return versionDir, nil
}

// convergedRe finds the node's log line saying how many nodes it found.
var convergedRe = regexp.MustCompile(`"msg":"cluster membership converged".*"nodes":(\d+)`)

// clusterNodeCount returns the node count from the converged line of log,
// or -1 if there is none yet.
func clusterNodeCount(log []byte) int {
	m := convergedRe.FindSubmatch(log)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// clusterStatus reads node's view of version v of db: every listed node's
// state and partitions, and the version's partition count and partitioner.
func clusterStatus(ctx context.Context, client *http.Client, addr, db, v string) (vs clusterVersion, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/"+db+"/", nil)
	if err != nil {
		return vs, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return vs, fmt.Errorf("%w: %v", errNotYet, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return vs, fmt.Errorf("%w: %s %v", errNotYet, resp.Status, err)
	}
	var st struct {
		Versions map[string]clusterVersion `json:"versions"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return vs, fmt.Errorf("status of %s: %w", addr, err)
	}
	return st.Versions[v], nil
}

type clusterVersion struct {
	NumPartitions int    `json:"num_partitions"`
	Partitioner   string `json:"partitioner"`
	Nodes         map[string]struct {
		State      string `json:"state"`
		Error      string `json:"error"`
		Partitions []int  `json:"partitions"`
	} `json:"nodes"`
}

// clusterSpec says how startCluster starts its nodes.
type clusterSpec struct {
	dir    string // a fresh directory: node<i>/ (config, data dir) under it
	source string // every node's source: a directory or nats-object://<bucket>
	logs   string // log file prefix in the work dir: <logs>-node<i>.log
	// extra is appended to every node's configuration, after its
	// [sharding] keys.
	extra string
}

// startCluster starts clusterNodes `spangle serve` processes (node 1
// embeds NATS, the others connect to it; cluster name "bench", sharding
// with replication 2, require_success_file) and waits until each has
// joined a cluster of all of them. It returns the nodes started so far
// even on error; stopCluster stops them. natsURL is node 1's NATS server.
func (b *bench) startCluster(ctx context.Context, spec clusterSpec) (nodes []*clusterNode, natsURL string, err error) {
	natsAddr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	natsURL = "nats://" + natsAddr
	for id := 1; id <= clusterNodes; id++ {
		addr, err := freeAddr()
		if err != nil {
			return nodes, natsURL, err
		}
		nats := fmt.Sprintf("listen = %q", natsAddr)
		if id > 1 {
			nats = fmt.Sprintf("url = %q", natsURL)
		}
		dir := filepath.Join(spec.dir, "node"+strconv.Itoa(id))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nodes, natsURL, err
		}
		config := fmt.Sprintf("require_success_file = true\nshard_id = \"%d\"\n[nats]\n%s\ncluster_name = \"bench\"\n"+
			"[sharding]\nenabled = true\nreplication = 2\ntime_to_converge = %q\n%s", id, nats, b.cfg.ClusterConverge.String(), spec.extra)
		n := &clusterNode{id: id, addr: addr, dir: dir, spec: spec}
		if err := os.WriteFile(n.configPath(), []byte(config), 0o644); err != nil {
			return nodes, natsURL, err
		}
		if err := b.startNode(n); err != nil {
			return nodes, natsURL, err
		}
		nodes = append(nodes, n)
		c := n.c
		if id == 1 { // the others need its NATS server
			err := pollUntil(ctx, c, 30*time.Second, pollInterval, "node 1's NATS server", func() error {
				conn, err := net.DialTimeout("tcp", natsAddr, time.Second)
				if err != nil {
					return fmt.Errorf("%w: %v", errNotYet, err)
				}
				return conn.Close()
			})
			if err != nil {
				return nodes, natsURL, err
			}
		}
	}
	for _, n := range nodes {
		err := pollUntil(ctx, n.c, 60*time.Second, 50*time.Millisecond, n.c.name+" to join", func() error {
			log, _ := os.ReadFile(n.c.logPath)
			switch got := clusterNodeCount(log); {
			case got < 0:
				return errNotYet
			case got != clusterNodes:
				return fmt.Errorf("%s converged with %d nodes, want %d", n.c.name, got, clusterNodes)
			}
			return nil
		})
		if err != nil {
			return nodes, natsURL, err
		}
	}
	return nodes, natsURL, nil
}

// stopCluster stops nodes, node 1 last (the others need its NATS server
// to shut down cleanly), adding what went wrong to res.
func stopCluster(nodes []*clusterNode, res *scenarioResult) {
	for _, n := range slices.Backward(nodes) {
		if serr := n.c.stop(); serr != nil {
			res.Problems = append(res.Problems, serr.Error())
		}
	}
}

// waitServing polls every node until all of them list version v of p.DB
// as ACTIVE on every node and answer a GET of key 0, and returns node 1's
// view of the version.
func (b *bench) waitServing(ctx context.Context, nodes []*clusterNode, p genParams, v string) (clusterVersion, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	var view clusterVersion
	for _, n := range nodes {
		err := pollUntil(ctx, n.c, b.cfg.BuildTimeout, pollInterval, n.c.name+" to serve version "+v, func() error {
			vs, err := clusterStatus(ctx, client, n.addr, p.DB, v)
			if err != nil {
				return err
			}
			if len(vs.Nodes) != clusterNodes {
				return fmt.Errorf("%w: %d nodes list the version", errNotYet, len(vs.Nodes))
			}
			for name, nv := range vs.Nodes {
				switch nv.State {
				case "ACTIVE":
				case "ERROR":
					return fmt.Errorf("%s: node %s: %s", n.c.name, name, nv.Error)
				default:
					return fmt.Errorf("%w: node %s: %s", errNotYet, name, nv.State)
				}
			}
			if code, _, err := clusterGet(client, n.addr, p.DB, key(0, p.KeySize)); err != nil || code != http.StatusOK {
				return fmt.Errorf("%w: GET: %d %v", errNotYet, code, err)
			}
			if n.id == 1 {
				view = vs
			}
			return nil
		})
		if err != nil {
			return view, err
		}
	}
	return view, nil
}

// runCluster is the cluster scenario.
func runCluster(ctx context.Context, b *bench) (res scenarioResult, err error) {
	res.Name = "cluster"
	p := b.cfg.Gen
	p.Records = b.cfg.ClusterRecords
	src := filepath.Join(b.cfg.Work, "cluster-source")
	b.log.Info("cluster: generating dataset", "dir", src, "records", p.Records)
	if _, err := generate(src, p); err != nil {
		return res, err
	}
	tmp, err := os.MkdirTemp(b.cfg.Work, dataDirPrefix)
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(tmp)
	root := filepath.Join(tmp, "source")
	versionDir, err := linkDataset(src, root, p)
	if err != nil {
		return res, err
	}
	nodes, _, err := b.startCluster(ctx, clusterSpec{dir: tmp, source: root, logs: "cluster"})
	defer stopCluster(nodes, &res)
	if err != nil {
		return res, err
	}
	b.log.Info("cluster: all nodes joined; publishing the version")

	// Publish and time until every node serves the version.
	start := time.Now()
	if err := markAndSignal(versionDir, nodes); err != nil {
		return res, err
	}
	view, err := b.waitServing(ctx, nodes, p, p.Version)
	if err != nil {
		return res, err
	}
	cr := &clusterResult{Records: p.Records, ConvergeSecs: time.Since(start).Seconds(), NumPartitions: view.NumPartitions}
	res.Cluster = cr
	b.log.Info("cluster: every node serves the version", "took", time.Since(start).Round(time.Millisecond))
	client := &http.Client{Timeout: 5 * time.Second}

	// Keys by whether node 1 holds their partition.
	target := nodes[0]
	self, ok := view.Nodes[target.addr]
	if !ok {
		return res, fmt.Errorf("node 1 (%s) is not in its own status", target.addr)
	}
	cr.HeldPartitions = slices.Sorted(slices.Values(self.Partitions))
	part, err := plugins.Builtin(view.Partitioner)
	if err != nil {
		return res, err
	}
	local, proxied, err := splitKeys(part, p.Records, p.KeySize, view.NumPartitions, self.Partitions, clusterKeyLimit, p.Seed)
	if err != nil {
		return res, err
	}
	cr.LocalKeys, cr.ProxiedKeys = len(local), len(proxied)
	if len(local) == 0 || len(proxied) == 0 {
		return res, fmt.Errorf("node 1 holds partitions %v of %d: %d local and %d proxied keys", self.Partitions, view.NumPartitions, len(local), len(proxied))
	}
	// Check the split on a few keys: the answer says whether it was proxied.
	for _, c := range []struct {
		ids  []int64
		want bool
	}{{local, false}, {proxied, true}} {
		for _, i := range c.ids[:min(len(c.ids), 20)] {
			code, px, err := clusterGet(client, target.addr, p.DB, key(i, p.KeySize))
			if err != nil || code != http.StatusOK || px != c.want {
				return res, fmt.Errorf("GET key %d from node 1: status %d, proxied %v (want %v), %v", i, code, px, c.want, err)
			}
		}
	}

	url := "http://" + target.addr + "/"
	prefix := "/" + p.DB + "/"
	// Rounds of a proxied load and a local one: the ratio is the median of
	// the rounds' (the machine's noise moves one round's by a tenth); the
	// first round's loads are the report's rows.
	var ratios, p99Diffs []float64
	for round := range b.cfg.ClusterRounds {
		var loads scenarioResult
		for _, l := range []struct {
			name string
			ids  []int64
		}{{"cluster proxied", proxied}, {"cluster local", local}} {
			lean := filepath.Join(b.cfg.Work, "cluster-keys.lua")
			strict := filepath.Join(b.cfg.Work, "cluster-keys-check.lua")
			if err := writeKeyListScript(lean, l.ids, p.KeySize, prefix, false); err != nil {
				return res, err
			}
			if err := writeKeyListScript(strict, l.ids, p.KeySize, prefix, true); err != nil {
				return res, err
			}
			if err := b.loadOnce(ctx, &loads, l.name, url, lean, strict, b.cfg.ClusterConns, nodes); err != nil {
				return res, err
			}
		}
		res.Problems = append(res.Problems, loads.Problems...)
		if round == 0 {
			res.Loads = loads.Loads
		} else {
			for _, l := range loads.Loads { // failed requests of any round fail the run
				if n := l.Errors.Total(); n > 0 {
					res.Problems = append(res.Problems, fmt.Sprintf("%s, round %d: %d failed requests (%s)", l.Scenario, round+1, n, l.Errors))
				}
			}
		}
		if len(loads.Loads) == 2 && loads.Loads[1].ReqPerSec > 0 {
			px, lo := loads.Loads[0], loads.Loads[1]
			ratios = append(ratios, px.ReqPerSec/lo.ReqPerSec)
			p99Diffs = append(p99Diffs, float64(px.P99us-lo.P99us)/1000)
			b.log.Info("cluster: round", "round", round+1, "proxied_vs_local", ratios[len(ratios)-1], "p99_diff_ms", p99Diffs[len(p99Diffs)-1])
		}
	}
	if len(ratios) > 0 {
		cr.Ratios = ratios
		cr.ThroughputRatio = median(ratios)
		cr.P99DiffMs = median(p99Diffs)
	}
	if b.cfg.ClusterUpgrades > 0 {
		b.log.Info("cluster: upgrades under load", "upgrades", b.cfg.ClusterUpgrades, "records", b.cfg.UpgradeRecords)
		up, err := b.upgradesUnderLoad(ctx, nodes, root, p)
		cr.Upgrades = up
		if err != nil {
			return res, err
		}
		if up.Failed > 0 || up.Regressions > 0 {
			res.Problems = append(res.Problems, fmt.Sprintf("upgrades under load: %d failed requests, %d version regressions (e.g. %q)",
				up.Failed, up.Regressions, up.Examples))
		}
	}
	return res, nil
}

// clusterGet GETs key of db from addr: the status and whether the answer
// was proxied.
func clusterGet(client *http.Client, addr, db, k string) (code int, proxied bool, err error) {
	resp, err := client.Get("http://" + addr + "/" + db + "/" + k)
	if err != nil {
		return 0, false, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("X-Spangle-Proxied-To") != "", nil
}

// loadOnce warms url up with the strict script, then runs the lean one at
// conns connections, adding a load named name to res; the server CPU is
// that of all nodes.
func (b *bench) loadOnce(ctx context.Context, res *scenarioResult, name, url, lean, strict string, conns int, nodes []*clusterNode) error {
	if b.cfg.Warmup > 0 {
		s, err := runWrk(ctx, b.wrk, wrkRun{Script: strict, URL: url, Conns: conns, Duration: b.cfg.Warmup})
		if err != nil {
			return fmt.Errorf("%s warm-up: %w", name, err)
		}
		if n := s.Errors.Total(); n > 0 {
			res.Problems = append(res.Problems, fmt.Sprintf("%s warm-up: %d failed requests (%s; status counts any but 200)", name, n, s.Errors))
		}
	}
	sample := func() (server time.Duration, busy time.Duration, err error) {
		for _, n := range nodes {
			s, err := sampleCPU(n.c.pid())
			if err != nil {
				return 0, 0, err
			}
			server += s.proc
			busy = s.busy
		}
		return server, busy, nil
	}
	r := wrkRun{Script: lean, URL: url, Conns: conns, Duration: b.cfg.Duration}
	sb, bb, cpuErr := sample()
	start := time.Now()
	s, err := runWrk(ctx, b.wrk, r)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	wall := time.Since(start)
	for _, n := range nodes {
		if err := n.c.exited(); err != nil {
			return err
		}
	}
	lr := newLoadResult(name, r, s)
	if sa, ba, err := sample(); err == nil && cpuErr == nil {
		lr.setCPU(sa-sb, ba-bb-(sa-sb)-s.CPU, wall)
	}
	b.log.Info("load", "scenario", name, "conns", conns, "req_per_s", int64(lr.ReqPerSec),
		"p50", s.P50, "p99", s.P99, "errors", s.Errors)
	res.Loads = append(res.Loads, lr)
	return nil
}

// markAndSignal completes a version of a directory source (writes its
// _SUCCESS) and tells every node to look for it now (SIGHUP).
func markAndSignal(versionDir string, nodes []*clusterNode) error {
	if err := os.WriteFile(filepath.Join(versionDir, "_SUCCESS"), nil, 0o644); err != nil {
		return err
	}
	for _, n := range nodes {
		if err := n.c.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			return err
		}
	}
	return nil
}
