package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spangledb/spangle/kvwatch/natstest"
	"github.com/spangledb/spangle/node/nodetest"
)

// clusterProc is one "spangle serve" process of a cluster test.
type clusterProc struct {
	id      int
	bin     string
	cfgPath string
	args    []string // serve's arguments
	cmd     *exec.Cmd
	base    string // http://host:port

	mu   sync.Mutex
	logs strings.Builder
}

func (p *clusterProc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// startClusterProc starts node id (shard id) of a cluster sharing the NATS
// server on natsPort: node 1 embeds it, the others connect to it. A node
// killed without a word stays a member for entryTTL; sharding holds extra
// lines of the [sharding] table.
func startClusterProc(t *testing.T, bin, root string, id, natsPort int, proxyTimeout, entryTTL time.Duration, sharding string) *clusterProc {
	t.Helper()
	nats := fmt.Sprintf("listen = \"127.0.0.1:%d\"", natsPort)
	if id > 1 {
		nats = fmt.Sprintf("url = \"nats://127.0.0.1:%d\"", natsPort)
	}
	nats += fmt.Sprintf("\ncluster_name = \"proc\"\nentry_ttl = \"%s\"", entryTTL)
	return startNodeProc(t, bin, root, id, nats, proxyTimeout, sharding)
}

// startNodeProc starts node id (shard id) of a sharded cluster (replication
// 2, time_to_converge 1s, plus the lines in sharding) serving root, with nats
// as the body of its [nats] table, and waits for its start-up line.
func startNodeProc(t *testing.T, bin, root string, id int, nats string, proxyTimeout time.Duration, sharding string) *clusterProc {
	t.Helper()
	dir := t.TempDir()
	config := fmt.Sprintf(`require_success_file = true
shard_id = "%d"
[nats]
%s
[sharding]
enabled = true
replication = 2
time_to_converge = "1s"
proxy_timeout = "%s"
%s
`, id, nats, proxyTimeout, sharding)
	p := &clusterProc{id: id, bin: bin, cfgPath: filepath.Join(dir, "spangle.toml")}
	p.logOnFailure(t)
	if err := os.WriteFile(p.cfgPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	p.args = []string{"serve", "--config", p.cfgPath, "--source", root,
		"--data-dir", filepath.Join(dir, "data"), "--bind", "127.0.0.1:0", "--log-format", "json"}
	p.start(t)
	return p
}

// start runs the process and waits for its start-up line; the logs of
// earlier runs stay in p.logs.
func (p *clusterProc) start(t *testing.T) {
	t.Helper()
	cmd := exec.Command(p.bin, p.args...)
	p.cmd = cmd
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addrc := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`"bind":"([^"]+)"`)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.logs.WriteString(line + "\n")
			p.mu.Unlock()
			if m := re.FindStringSubmatch(line); !sent && m != nil && strings.Contains(line, "spangle serving") {
				addrc <- m[1]
				sent = true
			}
		}
		io.Copy(io.Discard, stderr)
		close(addrc)
	}()
	select {
	case addr := <-addrc:
		if addr == "" {
			t.Fatalf("node %d exited before serving:\n%s", p.id, p.log())
		}
		p.base = "http://" + addr
	case <-time.After(testTimeout):
		t.Fatalf("node %d: no start-up line", p.id)
	}
}

// logOnFailure prints the end of the node's log if the test fails (the
// end only, so that the failures above stay in view).
func (p *clusterProc) logOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("node %d log, the end:\n%s", p.id, tail(p.log(), 4000))
		}
	})
}

// kill sends SIGKILL and reaps the process.
func (p *clusterProc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.cmd.Wait()
}

// waitFor polls cond until it returns nil, failing the test at the deadline.
func waitFor(t *testing.T, what string, cond func() error) {
	t.Helper()
	nodetest.WaitFor(t, testTimeout, what, cond)
}

// clusterGet reads key-k of db d from base: the value, its version and
// whether it was proxied, or an error for anything but a 200.
func clusterGet(c *http.Client, base string, k int) (value, version string, proxied bool, err error) {
	resp, err := c.Get(fmt.Sprintf("%s/d/key-%d", base, k))
	if err != nil {
		return "", "", false, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return "", "", false, err
	}
	if resp.StatusCode != 200 {
		return "", "", false, fmt.Errorf("%s key-%d: status %d %q", base, k, resp.StatusCode, body)
	}
	return string(body), resp.Header.Get("X-Spangle-Version"), resp.Header.Get("X-Spangle-Proxied-To") != "", nil
}

// TestClusterProcesses runs "spangle serve" processes on a three-server
// NATS cluster (R3 buckets), replication 2 and min_replication 2, while
// HTTP readers check every answer and that no node's version goes back:
//
//  1. three nodes: every key is readable from every node, some proxied;
//  2. an upgrade (SIGHUP to all) under readers;
//  3. node 3 killed (SIGKILL): every key stays readable from nodes 1 and 2
//     once proxy_timeout has passed;
//  4. v3 while node 3 is dead (still a member until its entries expire):
//     the partitions assigned to it are short of min_replication, so the
//     others build v3 and keep serving v2;
//  5. node 3 restarted on its data: it serves its v2 at once, builds its
//     part of v3, and the cluster switches to v3;
//  6. a late node 4 joins, builds its share and serves; v4 reaches all four;
//  7. with every NATS server stopped, node 2 stops promptly on SIGTERM.
func TestClusterProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs four binaries")
	}
	const keys, files = 60, 6
	const proxyTimeout = 500 * time.Millisecond
	// Long enough that a killed node stays a member through phase 4.
	const entryTTL = 60 * time.Second
	const sharding = "min_replication = 2"
	start := time.Now()
	root := t.TempDir()
	writeVersion(t, root, "d", "v1", files, keys)
	bin := buildBinary(t)
	servers := startNATSCluster(t, buildNATSServer(t))
	var urls []string
	for _, s := range servers {
		urls = append(urls, s.url)
	}
	waitJetStreamR3(t, urls)
	natsTable := fmt.Sprintf("url = %q\nreplicas = 3\ncluster_name = \"proc\"\nentry_ttl = %q",
		strings.Join(urls, ","), entryTTL.String())
	var nodes []*clusterProc
	for id := 1; id <= 3; id++ {
		nodes = append(nodes, startNodeProc(t, bin, root, id, natsTable, proxyTimeout, sharding))
	}
	client := &http.Client{Timeout: testTimeout}
	waitReady := func(n *clusterProc) {
		t.Helper()
		waitFor(t, fmt.Sprintf("node %d ready", n.id), func() error {
			resp, err := client.Get(n.base + "/readyz")
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			return nil
		})
	}
	for _, n := range nodes {
		waitReady(n)
	}
	waitAllKeys := func(v string, nodes []*clusterProc) {
		t.Helper()
		waitFor(t, fmt.Sprintf("every key of %s readable from %d nodes", v, len(nodes)), func() error {
			_, err := allKeys(client, nodes, keys, v)
			return err
		})
	}
	var proxied int
	waitFor(t, "every key of v1 readable from every node", func() (err error) {
		proxied, err = allKeys(client, nodes, keys, "v1")
		return err
	})
	if proxied == 0 {
		t.Errorf("no answer of %d was proxied: every node holds every partition", 3*keys)
	}
	t.Logf("cluster up, all keys readable (%d of %d proxied) after %v", proxied, 3*keys, time.Since(start).Round(time.Millisecond))

	sighup := func(nodes []*clusterProc) {
		t.Helper()
		for _, n := range nodes {
			if err := n.cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
		}
	}
	// haltClean stops r and reports its failures.
	haltClean := func(r *readers) {
		t.Helper()
		r.halt()
		r.noFailures()
	}

	// (2) Upgrade: v2 and SIGHUP to all; readers on nodes 2 and 3.
	phase := time.Now()
	r := startReaders(t, client, nodes[1:], 2, keys, "upgrade")
	r.waitSweeps("readers running", 1)
	writeVersion(t, root, "d", "v2", files, keys)
	sighup(nodes)
	waitAllKeys("v2", nodes)
	r.waitSweeps("readers past the upgrade", 1)
	haltClean(r)
	t.Logf("upgrade: every node on v2 after %v, %d requests", time.Since(phase).Round(time.Millisecond), r.requests.Load())

	// (3) kill -9 node 3; readers on nodes 1 and 2. Failures are allowed
	// only within proxy_timeout of the kill.
	phase = time.Now()
	r = startReaders(t, client, nodes[:2], 2, keys, "kill")
	r.waitSweeps("readers running", 1)
	killed := time.Now()
	nodes[2].kill(t)
	// Every reader passes twice over all keys after kill + proxy_timeout.
	waitFor(t, "proxy_timeout after the kill", func() error {
		if time.Since(killed) < proxyTimeout {
			return fmt.Errorf("too early")
		}
		return nil
	})
	r.waitSweeps("readers after the kill", 2)
	if _, err := allKeys(client, nodes[:2], keys, "v2"); err != nil {
		t.Errorf("after the kill: %v", err)
	}
	early := 0
	r.halt()
	for _, f := range r.takeFailures() {
		if f.at.Sub(killed) <= proxyTimeout {
			early++
			continue
		}
		t.Errorf("%v after the kill: %v", f.at.Sub(killed).Round(time.Millisecond), f.err)
	}
	t.Logf("kill: %d requests over %v, %d failed within proxy_timeout", r.requests.Load(),
		time.Since(phase).Round(time.Millisecond), early)

	// (4) v3 with node 3 dead but still a member: nodes 1 and 2 build
	// their parts of it, which leaves the partitions shared with node 3
	// with one replica, below min_replication: they keep serving v2.
	phase = time.Now()
	r = startReaders(t, client, nodes[:2], 2, keys, "v3 short of replicas, then node 3 restarted")
	writeVersion(t, root, "d", "v3", files, keys)
	sighup(nodes[:2])
	for _, n := range nodes[:2] {
		waitFor(t, fmt.Sprintf("node %d: v3 built, waiting for replicas", n.id), func() error {
			state, err := ownState(client, n, "v3")
			if err == nil && state != "AVAILABLE" {
				err = fmt.Errorf("v3 is %s", state)
			}
			return err
		})
	}
	r.waitSweeps("readers with v3 short of replicas", 1)
	if _, err := allKeys(client, nodes[:2], keys, "v2"); err != nil {
		t.Errorf("v3 short of replicas: %v", err)
	}
	t.Logf("min_replication: v3 built by nodes 1 and 2 and held back after %v", time.Since(phase).Round(time.Millisecond))

	// (5) Node 3 restarts on its data: it serves its v2 before it builds
	// anything, builds its part of v3, and every node switches.
	phase = time.Now()
	before := len(nodes[2].log())
	nodes[2].start(t)
	waitReady(nodes[2])
	waitAllKeys("v3", nodes)
	r.waitSweeps("readers past the v3 switch", 1)
	haltClean(r)
	log := nodes[2].log()[before:]
	if !strings.Contains(log, `"msg":"serving local version","db":"d","version":"v2"`) {
		t.Errorf("node 3 did not reuse its v2 after the restart")
	}
	if strings.Contains(log, `"msg":"building version","db":"d","version":"v2"`) {
		t.Errorf("node 3 built v2 again after the restart")
	}
	t.Logf("restart: node 3 back and every node on v3 after %v", time.Since(phase).Round(time.Millisecond))

	// (6) A late node 4 joins while v3 is active, builds its share of v3
	// and serves every key; then v4 reaches all four under readers.
	phase = time.Now()
	nodes = append(nodes, startNodeProc(t, bin, root, 4, natsTable, proxyTimeout, sharding))
	waitReady(nodes[3])
	waitAllKeys("v3", nodes)
	parts, err := ownPartitions(client, nodes[3], "v3")
	if err != nil || len(parts) == 0 {
		t.Errorf("late node 4 holds partitions %v of v3 (%v), want some", parts, err)
	}
	r = startReaders(t, client, nodes, 1, keys, "late node and v4")
	r.waitSweeps("readers on four nodes", 1)
	writeVersion(t, root, "d", "v4", files, keys)
	sighup(nodes)
	waitAllKeys("v4", nodes)
	r.waitSweeps("readers past v4", 1)
	haltClean(r)
	t.Logf("late node: node 4 holds %v of v3; every node on v4 after %v, %d requests", parts,
		time.Since(phase).Round(time.Millisecond), r.requests.Load())

	// (7) With every NATS server gone, the nodes keep serving, and one
	// stops promptly on SIGTERM (draining NATS subscriptions needs a
	// server).
	for _, s := range servers {
		s.stop(t)
	}
	if _, err := allKeys(client, nodes, keys, "v4"); err != nil {
		t.Errorf("NATS gone: %v", err)
	}
	sigtermPromptly(t, nodes[1], "without NATS")
	t.Logf("total %v", time.Since(start).Round(time.Millisecond))
}

// TestEmbeddedNATSKilled runs two nodes, node 1 embedding the NATS server
// node 2 uses, and kills node 1: node 2 keeps serving every key (proxying
// no more) and still stops promptly on SIGTERM.
func TestEmbeddedNATSKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs two binaries")
	}
	const keys, files = 20, 2
	root := t.TempDir()
	writeVersion(t, root, "d", "v1", files, keys)
	bin := buildBinary(t)
	natsPort := natstest.FreePort(t)
	// Replication 2 over two nodes: each holds everything.
	n1 := startClusterProc(t, bin, root, 1, natsPort, 500*time.Millisecond, 10*time.Second, "")
	n2 := startClusterProc(t, bin, root, 2, natsPort, 500*time.Millisecond, 10*time.Second, "")
	client := &http.Client{Timeout: testTimeout}
	nodes := []*clusterProc{n1, n2}
	waitFor(t, "every key of v1 readable from both nodes", func() error {
		_, err := allKeys(client, nodes, keys, "v1")
		return err
	})
	n1.kill(t)
	if _, err := allKeys(client, nodes[1:], keys, "v1"); err != nil {
		t.Errorf("node 1 and NATS gone: %v", err)
	}
	sigtermPromptly(t, n2, "after the node embedding NATS was killed")
}

// sigtermPromptly sends SIGTERM to n and wants a clean exit within 5s.
func sigtermPromptly(t *testing.T, n *clusterProc, when string) {
	t.Helper()
	stopped := time.Now()
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- n.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("node %d, SIGTERM %s: %v\n%s", n.id, when, err, n.log())
		}
		if d := time.Since(stopped); d > 5*time.Second {
			t.Errorf("node %d took %v to stop %s", n.id, d, when)
		}
	case <-time.After(testTimeout):
		t.Fatalf("node %d did not stop after SIGTERM %s:\n%s", n.id, when, n.log())
	}
}

// ownVersion is a node's own entry for a version in its status JSON.
type ownVersion struct {
	State      string `json:"state"`
	Partitions []int  `json:"partitions"`
	ShardID    string `json:"shard_id"`
}

// ownEntry reads n's status of db d and returns n's own entry for
// version (the one with n's shard ID).
func ownEntry(c *http.Client, n *clusterProc, version string) (ownVersion, error) {
	req, _ := http.NewRequest("GET", n.base+"/d/", nil)
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return ownVersion{}, err
	}
	defer resp.Body.Close()
	var st struct {
		Versions map[string]struct {
			Nodes map[string]ownVersion `json:"nodes"`
		} `json:"versions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return ownVersion{}, err
	}
	for _, e := range st.Versions[version].Nodes {
		if e.ShardID == fmt.Sprint(n.id) {
			return e, nil
		}
	}
	return ownVersion{}, fmt.Errorf("node %d: no entry of its own for %s", n.id, version)
}

func ownState(c *http.Client, n *clusterProc, version string) (string, error) {
	e, err := ownEntry(c, n, version)
	return e.State, err
}

func ownPartitions(c *http.Client, n *clusterProc, version string) ([]int, error) {
	e, err := ownEntry(c, n, version)
	return e.Partitions, err
}

// readKey reads key-k from n and checks its value against the version the
// answer names, and that version against last, the newest this reader has
// seen, which it advances.
func readKey(client *http.Client, n *clusterProc, k int, last *string) error {
	val, v, _, err := clusterGet(client, n.base, k)
	switch {
	case err != nil:
	case v < *last:
		err = fmt.Errorf("node %d: version went back from %s to %s", n.id, *last, v)
	case val != fmt.Sprintf("%s:%d", v, k):
		err = fmt.Errorf("node %d key-%d: %q from version %s", n.id, k, val, v)
	default:
		*last = v
	}
	return err
}

// TestEmbeddedNATSCluster runs three nodes that each embed one member of a
// three-server NATS cluster (R3 buckets) and kills one with SIGKILL: the
// other two keep a working NATS between them, so an upgrade published
// afterwards still reaches both.
func TestEmbeddedNATSCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three binaries")
	}
	const keys, files = 30, 3
	root := t.TempDir()
	writeVersion(t, root, "d", "v1", files, keys)
	bin := buildBinary(t)
	var clientPorts, routes []string
	for range 3 {
		clientPorts = append(clientPorts, fmt.Sprint(natstest.FreePort(t)))
		routes = append(routes, fmt.Sprintf("%q", fmt.Sprintf("nats://127.0.0.1:%d", natstest.FreePort(t))))
	}
	var nodes []*clusterProc
	for i := range 3 {
		route := strings.Trim(routes[i], `"`)
		natsTable := fmt.Sprintf(`listen = "127.0.0.1:%s"
server_name = "n%d"
embedded_cluster = "embedded"
embedded_cluster_listen = %q
embedded_routes = [%s]
replicas = 3
cluster_name = "emb"`, clientPorts[i], i+1, strings.TrimPrefix(route, "nats://"), strings.Join(routes, ", "))
		nodes = append(nodes, startNodeProc(t, bin, root, i+1, natsTable, 500*time.Millisecond, ""))
	}
	client := &http.Client{Timeout: testTimeout}
	waitFor(t, "every key of v1 readable from every node", func() error {
		_, err := allKeys(client, nodes, keys, "v1")
		return err
	})

	nodes[0].kill(t)
	writeVersion(t, root, "d", "v2", files, keys)
	for _, n := range nodes[1:] {
		if err := n.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "every key of v2 readable from nodes 2 and 3", func() error {
		_, err := allKeys(client, nodes[1:], keys, "v2")
		return err
	})

	// A rollback through the cluster's versions bucket: both nodes still
	// hold v1 (kept for peers) and switch back to it; then activate
	// --latest returns them to v2.
	natsURL := "nats://127.0.0.1:" + clientPorts[1]
	waitFor(t, "a rollback from v2", func() error {
		code, _, stderr := runCLI(t, bin, "rollback", "--nats", natsURL, "--cluster", "emb", "d")
		if code != 0 {
			return fmt.Errorf("exit %d: %s", code, stderr)
		}
		return nil
	})
	waitFor(t, "every key of v1 readable again from nodes 2 and 3", func() error {
		_, err := allKeys(client, nodes[1:], keys, "v1")
		return err
	})
	for _, n := range nodes[1:] {
		if countLog(n, "switching to a version kept here, as pinned") == 0 {
			t.Errorf("node %d built v1 again instead of switching to the copy it kept", n.id)
		}
	}
	if code, _, stderr := runCLI(t, bin, "activate", "--nats", natsURL, "--cluster", "emb", "--latest", "d"); code != 0 {
		t.Fatalf("activate --latest: exit %d: %s", code, stderr)
	}
	waitFor(t, "every key of v2 readable again from nodes 2 and 3", func() error {
		_, err := allKeys(client, nodes[1:], keys, "v2")
		return err
	})
}
