package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// clusterProc is one "spangle serve" process of TestClusterProcesses.
type clusterProc struct {
	id   int
	cmd  *exec.Cmd
	base string // http://host:port

	mu   sync.Mutex
	logs strings.Builder
}

func (p *clusterProc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startClusterProc starts node id (shard id) of a cluster sharing the NATS
// server on natsPort: node 1 embeds it, the others connect to it.
func startClusterProc(t *testing.T, bin, root string, id, natsPort int, proxyTimeout time.Duration) *clusterProc {
	t.Helper()
	nats := fmt.Sprintf("listen = \"127.0.0.1:%d\"", natsPort)
	if id > 1 {
		nats = fmt.Sprintf("url = \"nats://127.0.0.1:%d\"", natsPort)
	}
	return startNodeProc(t, bin, root, id, nats+"\ncluster_name = \"proc\"", proxyTimeout)
}

// startNodeProc starts node id (shard id) of a sharded cluster (replication
// 2, time_to_converge 1s) serving root, with nats as the body of its [nats]
// table, and waits for its start-up line.
func startNodeProc(t *testing.T, bin, root string, id int, nats string, proxyTimeout time.Duration) *clusterProc {
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
`, id, nats, proxyTimeout)
	cfgPath := filepath.Join(dir, "spangle.toml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &clusterProc{id: id}
	p.cmd = exec.Command(bin, "serve", "--config", cfgPath, "--source", root,
		"--data-dir", filepath.Join(dir, "data"), "--bind", "127.0.0.1:0", "--log-format", "json")
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		p.cmd.Wait()
		if t.Failed() {
			t.Logf("node %d log:\n%s", id, p.log())
		}
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
			t.Fatalf("node %d exited before serving:\n%s", id, p.log())
		}
		p.base = "http://" + addr
	case <-time.After(testTimeout):
		t.Fatalf("node %d: no start-up line", id)
	}
	return p
}

// waitFor polls cond until it returns nil, failing the test at the deadline.
func waitFor(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
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

// TestClusterProcesses runs three "spangle serve" processes sharing one NATS
// server (node 1 embeds it), replication 2, and checks that every key is
// readable from every node, that an upgrade (SIGHUP to all) never takes a
// reader's version back, and that with node 3 killed (SIGKILL) every key
// stays readable from nodes 1 and 2 once proxy_timeout has passed.
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

func TestClusterProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three binaries")
	}
	const keys, files = 60, 6
	const proxyTimeout = 500 * time.Millisecond
	start := time.Now()
	root := t.TempDir()
	writeVersion(t, root, "d", "v1", files, keys)
	bin := buildBinary(t)
	natsPort := freePort(t)
	var nodes []*clusterProc
	for id := 1; id <= 3; id++ {
		nodes = append(nodes, startClusterProc(t, bin, root, id, natsPort, proxyTimeout))
	}
	client := &http.Client{Timeout: testTimeout}
	for _, n := range nodes {
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
	// allKeys checks that every key is readable from every node in nodes
	// with version v's value, and counts proxied answers.
	allKeys := func(v string, nodes []*clusterProc) (proxied int, err error) {
		for _, n := range nodes {
			for k := range keys {
				val, ver, px, err := clusterGet(client, n.base, k)
				if err != nil {
					return 0, err
				}
				if ver != v || val != fmt.Sprintf("%s:%d", v, k) {
					return 0, fmt.Errorf("node %d key-%d: %q version %q, want version %s", n.id, k, val, ver, v)
				}
				if px {
					proxied++
				}
			}
		}
		return proxied, nil
	}
	var proxied int
	waitFor(t, "every key of v1 readable from every node", func() (err error) {
		proxied, err = allKeys("v1", nodes)
		return err
	})
	if proxied == 0 {
		t.Errorf("no answer of %d was proxied: every node holds every partition", 3*keys)
	}
	t.Logf("cluster up, all keys readable (%d of %d proxied) after %v", proxied, 3*keys, time.Since(start).Round(time.Millisecond))

	// readers reads keys from base until stop, checking each answer and
	// that the version never goes back; it records the time of every
	// failure.
	type failure struct {
		at  time.Time
		err error
	}
	var (
		stop     atomic.Bool
		wg       sync.WaitGroup
		fmu      sync.Mutex
		failures []failure
		sweeps   []atomic.Int64 // per reader: full passes over the keys
		requests atomic.Int64
	)
	runReaders := func(targets []*clusterProc, perNode int) {
		stop.Store(false)
		failures = nil
		sweeps = make([]atomic.Int64, len(targets)*perNode)
		for i := range len(targets) * perNode {
			n := targets[i%len(targets)]
			wg.Add(1)
			go func() {
				defer wg.Done()
				last := ""
				for k := i; !stop.Load(); k++ {
					if k%keys == 0 {
						sweeps[i].Add(1)
					}
					err := readKey(client, n, k%keys, &last)
					requests.Add(1)
					if err != nil {
						fmu.Lock()
						failures = append(failures, failure{time.Now(), err})
						fmu.Unlock()
					}
				}
			}()
		}
	}
	stopReaders := func() []failure {
		stop.Store(true)
		wg.Wait()
		fmu.Lock()
		defer fmu.Unlock()
		return failures
	}
	// waitSweeps waits until every reader has made n more full passes.
	waitSweeps := func(what string, n int64) {
		t.Helper()
		base := make([]int64, len(sweeps))
		for i := range sweeps {
			base[i] = sweeps[i].Load()
		}
		waitFor(t, what, func() error {
			for i := range sweeps {
				if got := sweeps[i].Load() - base[i]; got < n {
					return fmt.Errorf("reader %d: %d passes", i, got)
				}
			}
			return nil
		})
	}

	// (a) Upgrade: v2 and SIGHUP to all; readers on nodes 2 and 3.
	phase := time.Now()
	runReaders(nodes[1:], 2)
	waitSweeps("readers running", 1)
	writeVersion(t, root, "d", "v2", files, keys)
	for _, n := range nodes {
		if err := n.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "every key of v2 readable from every node", func() error {
		_, err := allKeys("v2", nodes)
		return err
	})
	waitSweeps("readers past the upgrade", 1)
	for _, f := range stopReaders() {
		t.Errorf("upgrade: %v", f.err)
	}
	t.Logf("upgrade: every node on v2 after %v, %d requests", time.Since(phase).Round(time.Millisecond), requests.Load())

	// (b) kill -9 node 3; readers on nodes 1 and 2. Failures are allowed
	// only within proxy_timeout of the kill.
	phase = time.Now()
	requests.Store(0)
	runReaders(nodes[:2], 2)
	waitSweeps("readers running", 1)
	killed := time.Now()
	if err := nodes[2].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	nodes[2].cmd.Wait()
	// Every reader passes twice over all keys after kill + proxy_timeout.
	waitFor(t, "proxy_timeout after the kill", func() error {
		if time.Since(killed) < proxyTimeout {
			return fmt.Errorf("too early")
		}
		return nil
	})
	waitSweeps("readers after the kill", 2)
	if _, err := allKeys("v2", nodes[:2]); err != nil {
		t.Errorf("after the kill: %v", err)
	}
	early := 0
	for _, f := range stopReaders() {
		if f.at.Sub(killed) <= proxyTimeout {
			early++
			continue
		}
		t.Errorf("%v after the kill: %v", f.at.Sub(killed).Round(time.Millisecond), f.err)
	}
	t.Logf("kill: %d requests over %v, %d failed within proxy_timeout", requests.Load(),
		time.Since(phase).Round(time.Millisecond), early)

	// With the node embedding NATS gone, the others still stop promptly on
	// SIGTERM (draining NATS subscriptions needs the server).
	if err := nodes[0].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	nodes[0].cmd.Wait()
	stopped := time.Now()
	if err := nodes[1].cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- nodes[1].cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("node 2 after SIGTERM without NATS: %v\n%s", err, nodes[1].log())
		}
		if d := time.Since(stopped); d > 5*time.Second {
			t.Errorf("node 2 took %v to stop without NATS", d)
		}
	case <-time.After(testTimeout):
		t.Fatalf("node 2 did not stop after SIGTERM without NATS:\n%s", nodes[1].log())
	}
	t.Logf("total %v", time.Since(start).Round(time.Millisecond))
}
