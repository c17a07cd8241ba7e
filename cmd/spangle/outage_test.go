package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/kvwatch/natstest"
)

var (
	natsBinOnce sync.Once
	natsBinPath string
	natsBinErr  error
)

// buildNATSServer builds the nats-server of go.mod once per test run, next
// to the spangle binary (TestMain removes both).
func buildNATSServer(t *testing.T) string {
	t.Helper()
	buildBinary(t) // creates binDir
	natsBinOnce.Do(func() {
		natsBinPath = filepath.Join(binDir, "nats-server")
		if out, err := exec.Command("go", "build", "-o", natsBinPath, "github.com/nats-io/nats-server/v2").CombinedOutput(); err != nil {
			natsBinErr = fmt.Errorf("go build nats-server: %v\n%s", err, out)
		}
	})
	if natsBinErr != nil {
		t.Fatal(natsBinErr)
	}
	return natsBinPath
}

// natsProc is one nats-server process of a three-server JetStream cluster.
// A restart reuses its ports and store directory.
type natsProc struct {
	name     string
	args     []string
	url      string
	storeDir string
	logPath  string
	cmd      *exec.Cmd // nil while stopped
}

// startNATSCluster starts three nats-server processes forming a JetStream
// cluster on random loopback ports, each with its own store directory.
func startNATSCluster(t *testing.T, bin string) []*natsProc {
	t.Helper()
	var clientPorts, routePorts []int
	var routes []string
	for range 3 {
		clientPorts = append(clientPorts, natstest.FreePort(t))
		routePorts = append(routePorts, natstest.FreePort(t))
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", routePorts[len(routePorts)-1]))
	}
	var procs []*natsProc
	for i := range 3 {
		dir := t.TempDir()
		p := &natsProc{
			name:     fmt.Sprintf("n%d", i+1),
			url:      fmt.Sprintf("nats://127.0.0.1:%d", clientPorts[i]),
			storeDir: filepath.Join(dir, "store"),
			logPath:  filepath.Join(dir, "nats.log"),
		}
		p.args = []string{"-a", "127.0.0.1", "-p", fmt.Sprint(clientPorts[i]), "--server_name", p.name,
			"-js", "-sd", p.storeDir, "--cluster_name", "outage",
			"--cluster", fmt.Sprintf("nats://127.0.0.1:%d", routePorts[i]), "--routes", strings.Join(routes, ",")}
		procs = append(procs, p)
		p.start(t, bin)
		p.cleanup(t)
	}
	return procs
}

// cleanup kills the server at the end of the test, and logs the tail of
// its log if the test failed.
func (p *natsProc) cleanup(t *testing.T) {
	t.Cleanup(func() {
		if p.cmd != nil {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
		if t.Failed() {
			b, _ := os.ReadFile(p.logPath)
			t.Logf("nats-server %s log (tail):\n%s", p.name, tail(string(b), 4000))
		}
	})
}

func (p *natsProc) start(t *testing.T, bin string) {
	t.Helper()
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // the child has its own descriptor
	cmd := exec.Command(bin, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.cmd = cmd
}

// stop sends SIGTERM and waits for the process to exit.
func (p *natsProc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(testTimeout):
		t.Fatalf("nats-server %s did not stop after SIGTERM", p.name)
	}
	p.cmd = nil
}

// countLog counts the log lines of n containing s.
func countLog(n *clusterProc, s string) int { return strings.Count(n.log(), s) }

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// waitJetStreamR3 polls until a client of urls can create an R3 KV bucket.
func waitJetStreamR3(t *testing.T, urls []string) {
	t.Helper()
	waitFor(t, "JetStream R3 bucket", func() error {
		nc, err := nats.Connect(strings.Join(urls, ","), nats.Timeout(time.Second), nats.NoReconnect())
		if err != nil {
			return err
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "outage_probe", Replicas: 3})
		return err
	})
}

// TestNATSOutage runs three "spangle serve" processes (replication 2) on a
// three-server NATS cluster (R3 buckets) while HTTP readers loop over every
// key on every node, and checks issue 3's outage requirements:
//
//  1. one NATS server stopped: no request fails;
//  2. every NATS server stopped: serving never stops; v2 is published and
//     every node gets SIGHUP during the outage;
//  3. NATS restarted (same ports and stores): every node reaches v2, and no
//     reader ever sees a version go back.
func TestNATSOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs nats-server and three spangle binaries")
	}
	const keys, files = 60, 6
	const proxyTimeout = 500 * time.Millisecond
	start := time.Now()
	bin := buildBinary(t)
	natsBin := buildNATSServer(t)
	t.Logf("binaries built after %v", time.Since(start).Round(time.Millisecond))

	servers := startNATSCluster(t, natsBin)
	var urls []string
	for _, s := range servers {
		urls = append(urls, s.url)
	}
	waitJetStreamR3(t, urls)
	t.Logf("NATS cluster ready after %v", time.Since(start).Round(time.Millisecond))

	root := t.TempDir()
	writeVersion(t, root, "d", "v1", files, keys)
	natsTable := fmt.Sprintf("url = %q\nreplicas = 3\ncluster_name = \"outage\"", strings.Join(urls, ","))
	var nodes []*clusterProc
	for id := 1; id <= 3; id++ {
		nodes = append(nodes, startNodeProc(t, bin, root, id, natsTable, proxyTimeout, ""))
	}
	client := &http.Client{Timeout: 5 * time.Second}
	everyKey := func(v string) error {
		_, err := allKeys(client, nodes, keys, v)
		return err
	}
	waitFor(t, "every key of v1 readable from every node", func() error { return everyKey("v1") })
	t.Logf("spangle cluster serving v1 after %v", time.Since(start).Round(time.Millisecond))

	// Readers: two per node, for the whole test.
	r := startReaders(t, client, nodes, 2, keys, "start")
	r.waitSweeps("readers running", 1)

	// 1. One NATS server stopped.
	at := time.Now()
	r.setPhase("one NATS server down")
	servers[0].stop(t)
	// Hold until the two others serve JetStream again and every node that
	// lost its connection has reconnected.
	waitJetStreamR3(t, urls[1:])
	for _, n := range nodes {
		waitFor(t, fmt.Sprintf("node %d connected", n.id), func() error {
			if lost, back := countLog(n, "NATS connection lost"), countLog(n, "NATS connection restored"); lost > back {
				return fmt.Errorf("%d losses, %d restores", lost, back)
			}
			return nil
		})
	}
	r.waitSweeps("readers with one NATS server down", 3)
	r.noFailures()
	t.Logf("one NATS server down: readers made 3 passes in %v, %d requests so far", time.Since(at).Round(time.Millisecond), r.requests.Load())

	// 2. Every NATS server stopped; v2 published and SIGHUP during the
	// outage.
	at = time.Now()
	r.setPhase("every NATS server down")
	for _, s := range servers[1:] {
		s.stop(t)
	}
	for _, n := range nodes {
		waitFor(t, fmt.Sprintf("node %d to notice the outage", n.id), func() error {
			if lost, back := countLog(n, "NATS connection lost"), countLog(n, "NATS connection restored"); lost <= back {
				return fmt.Errorf("%d losses, %d restores", lost, back)
			}
			return nil
		})
	}
	r.waitSweeps("readers with NATS down", 3)
	writeVersion(t, root, "d", "v2", files, keys)
	hup := time.Now()
	for _, n := range nodes {
		if err := n.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		waitFor(t, fmt.Sprintf("node %d to log SIGHUP", n.id), func() error {
			if countLog(n, "SIGHUP: looking for new versions") == 0 {
				return fmt.Errorf("no SIGHUP line")
			}
			return nil
		})
	}
	// Keep NATS down past the nodes' KV operation timeout (2s) and
	// time_to_converge (1s), so that the upgrade meets the outage.
	waitFor(t, "the outage to outlast KV timeouts", func() error {
		if time.Since(hup) < 4*time.Second {
			return fmt.Errorf("too early")
		}
		return nil
	})
	r.waitSweeps("readers with NATS down after SIGHUP", 3)
	r.noFailures()
	during := "v1"
	if everyKey("v1") != nil {
		during = "not v1 everywhere"
		if everyKey("v2") == nil {
			during = "v2"
		}
	}
	t.Logf("at the end of the outage the nodes serve %s", during)
	t.Logf("NATS down: readers made 6 passes in %v, %d requests so far", time.Since(at).Round(time.Millisecond), r.requests.Load())

	// 3. NATS back: every node reaches v2.
	at = time.Now()
	r.setPhase("NATS restarted")
	for _, s := range servers {
		s.start(t, natsBin)
	}
	waitFor(t, "every key of v2 readable from every node after NATS returned", func() error { return everyKey("v2") })
	t.Logf("NATS back: every node on v2 after %v", time.Since(at).Round(time.Millisecond))
	r.waitSweeps("readers past the upgrade", 1)
	r.halt()
	r.noFailures()
	t.Logf("%d requests, total %v", r.requests.Load(), time.Since(start).Round(time.Millisecond))
}
