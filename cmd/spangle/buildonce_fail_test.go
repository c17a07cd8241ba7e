package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spangledb/spangle/node/cluster"
)

// Build once's failure paths with real processes (issue 35): three
// nodes on a nats-server of their own, replication 2, build_once_wait
// 5m. A builder whose build fails, or that is killed mid-build, must not
// leave its peers waiting the 5 minutes: they serve the version within
// testTimeout (60s), a fifth of it, which bounds a build of these
// versions (about 1 MiB, under a second on a quiet machine) with the
// entry TTL (3s) and the start-up waits many times over.

const (
	onceWait     = 5 * time.Minute
	onceEntryTTL = 3 * time.Second
	onceSharding = "heal_after = \"1s\"\n[cluster]\nbuild_once_min_size = \"0\"\nbuild_once_wait = \"5m\"\n"
)

// onceBuilder returns the index, of nodes n1, n2, n3, of d/v1's builder.
func onceBuilder() int {
	b := cluster.Builder([]string{"n1", "n2", "n3"}, "d", "v1")
	return int(b[1] - '1')
}

// metricWith sums the samples of metric family name in n's /metrics
// whose labels contain label (`outcome="failed"`).
func metricWith(t *testing.T, client *http.Client, n *clusterProc, name, label string) float64 {
	t.Helper()
	resp, err := client.Get(n.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for l := range strings.Lines(string(b)) {
		if strings.HasPrefix(l, name+"{") && strings.Contains(l, label) {
			var v float64
			f := strings.Fields(l)
			if _, err := fmt.Sscan(f[len(f)-1], &v); err != nil {
				t.Fatalf("node %d: %q: %v", n.id, l, err)
			}
			sum += v
		}
	}
	return sum
}

// waitingFor returns the builder n's status says it waits for to build
// d/version ("" when none).
func waitingFor(client *http.Client, n *clusterProc, version string) (string, error) {
	req, _ := http.NewRequest("GET", n.base+"/d/", nil)
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var st struct {
		Versions map[string]struct {
			Build *struct {
				WaitingForBuilder string `json:"waiting_for_builder"`
			} `json:"build"`
		} `json:"versions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return "", err
	}
	if b := st.Versions[version].Build; b != nil {
		return b.WaitingForBuilder, nil
	}
	return "", nil
}

// startOnceNodes starts nodes n1…n3, node i on roots[i] with the
// top-level lines tops[i], and waits until each has converged.
func startOnceNodes(t *testing.T, bin, natsURL string, roots, tops []string) []*clusterProc {
	t.Helper()
	var nodes []*clusterProc
	for i := range 3 {
		nodes = append(nodes, startCopyNodeWith(t, bin, roots[i], i+1, natsURL, onceEntryTTL, tops[i], onceSharding))
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range nodes {
				t.Logf("node %d, build once:\n%s", n.id, linesWith(n.log(), "build once", "peer copy", "version"))
			}
		}
	})
	waitConverged(t, nodes)
	return nodes
}

// hup has nodes look at their source now.
func hup(t *testing.T, nodes []*clusterProc) {
	t.Helper()
	for _, n := range nodes {
		if err := n.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBuildOnceBuilderFailsProcesses: d/v1's builder reads a source of
// its own in which one file is cut in half (the others' is whole): its
// build fails, it says so in its node entry, and the two others, which
// were waiting to copy from it, build their partitions from the source
// at once and serve every key, long before build_once_wait. It fails
// without the failure in the node entry (they waited the 5 minutes).
func TestBuildOnceBuilderFailsProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs nats-server and three binaries")
	}
	good, bad := t.TempDir(), t.TempDir()
	for _, r := range []string{good, bad} {
		if err := os.MkdirAll(filepath.Join(r, "d"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b := onceBuilder()
	roots := []string{good, good, good}
	roots[b] = bad
	bin := buildBinary(t)
	nats := startPlainNATS(t, buildNATSServer(t))
	client := &http.Client{Timeout: testTimeout}
	nodes := startOnceNodes(t, bin, nats.url, roots, []string{"", "", ""})
	var peers []*clusterProc
	for i, n := range nodes {
		if i != b {
			peers = append(peers, n)
		}
	}

	writeCopyVersion(t, good, "v1")
	// The builder's copy, cut, then moved into its source at once.
	staged := filepath.Join(bad, "v1")
	if out, err := exec.Command("cp", "-r", filepath.Join(good, "d", "v1"), staged).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	cut := filepath.Join(staged, "part-00001")
	st, err := os.Stat(cut)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(cut, st.Size()/2); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(staged, filepath.Join(bad, "d", "v1")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	hup(t, nodes)
	waitFor(t, "every key of v1 readable from the builder's two peers", func() error {
		_, err := allKeys(client, peers, copyKeys, "v1")
		return err
	})
	took := time.Since(start)
	t.Logf("the peers of the failed builder (node %d) serve v1 %v after it appeared (build_once_wait %v)", b+1, took.Round(time.Millisecond), onceWait)
	if took >= onceWait/5 {
		t.Errorf("the peers served v1 after %v: they waited for the failed builder", took)
	}
	if got := metricWith(t, client, nodes[b], "spangle_build_once_total", `outcome="failed"`); got != 1 {
		t.Errorf("the builder counted %v failed builds: want 1", got)
	}
	for _, n := range peers {
		if got := metricWith(t, client, n, "spangle_build_once_total", `outcome="fallback"`); got != 1 {
			t.Errorf("node %d counted %v fallbacks: want 1", n.id, got)
		}
	}
}

// TestBuildOnceBuilderKilledProcesses: d/v1's builder reads its source
// at 64 KiB/s (max_download_bandwidth), so that its build of the 1 MiB
// version lasts about 17 s; while it builds, its peers' status says they
// wait for it (naming it), and it is killed (SIGKILL). Once its node
// entry has expired (entry_ttl 3s) the two others agree on the next
// builder: one builds every partition, the other copies from it, and
// both serve every key long before build_once_wait, the cluster still
// reading the version about once more, not once per node.
func TestBuildOnceBuilderKilledProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs nats-server and three binaries")
	}
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	b := onceBuilder()
	tops := []string{"", "", ""}
	tops[b] = "max_download_bandwidth = \"64KiB\"\n"
	bin := buildBinary(t)
	nats := startPlainNATS(t, buildNATSServer(t))
	client := &http.Client{Timeout: testTimeout}
	nodes := startOnceNodes(t, bin, nats.url, []string{root, root, root}, tops)
	builder := nodes[b]
	var peers []*clusterProc
	for i, n := range nodes {
		if i != b {
			peers = append(peers, n)
		}
	}

	size := writeCopyVersion(t, root, "v1")
	hup(t, nodes)
	addr := strings.TrimPrefix(builder.base, "http://")
	for _, n := range peers {
		waitFor(t, fmt.Sprintf("node %d's status says it waits for its builder", n.id), func() error {
			w, err := waitingFor(client, n, "v1")
			if err != nil || w != addr {
				return fmt.Errorf("waiting for %q (%v), want %q", w, err, addr)
			}
			return nil
		})
	}
	waitFor(t, "the builder reads the source", func() error {
		if got, err := nodeMetric(client, builder, "spangle_source_read_bytes_total"); err != nil || got == 0 {
			return fmt.Errorf("read %v (%v)", got, err)
		}
		return nil
	})
	read := mustMetric(t, client, builder, "spangle_source_read_bytes_total")
	builder.kill(t)
	if read >= float64(size) {
		t.Fatalf("the builder had read %v bytes of %d when killed: not mid-build", read, size)
	}
	start := time.Now()
	waitFor(t, "every key of v1 readable from the killed builder's two peers", func() error {
		_, err := allKeys(client, peers, copyKeys, "v1")
		return err
	})
	took := time.Since(start)
	t.Logf("the peers of the builder killed after reading %v of %d bytes serve v1 %v later (build_once_wait %v)", read, size, took.Round(time.Millisecond), onceWait)
	if took >= onceWait/5 {
		t.Errorf("the peers served v1 after %v: they waited for the killed builder", took)
	}
	built, copied, reads := 0.0, 0.0, 0.0
	for _, n := range peers {
		built += metricWith(t, client, n, "spangle_build_once_total", `outcome="built"`)
		copied += metricWith(t, client, n, "spangle_build_once_total", `outcome="copied"`)
		reads += mustMetric(t, client, n, "spangle_source_read_bytes_total")
	}
	if built != 1 || copied != 1 {
		t.Errorf("the peers built %v and copied %v: want the next builder to build, the other to copy", built, copied)
	}
	if reads < float64(size) || reads > 1.2*float64(size) {
		t.Errorf("the peers read %v bytes of the source (%d bytes): want about once", reads, size)
	}
}
