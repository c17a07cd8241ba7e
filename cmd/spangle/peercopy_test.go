package main

import (
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spangledb/spangle/kvwatch/natstest"
	"github.com/spangledb/spangle/node/nodetest"
)

// Peer copies and build once with real processes (issue 35): nodes of
// one cluster on loopback (node 1 embeds NATS), versions whose values are
// padded so that files, not the protocol, dominate the bytes.

const (
	copyKeys  = 60
	copyFiles = 6
	copyPad   = 1 << 20 // random bytes beside the keys: about 170 KiB a partition file
)

// writeCopyVersion writes version v of db d under root: key-<i> →
// <v>:<i> and pad-<j> keys of random values, in copyFiles files, and
// returns the files' total size.
func writeCopyVersion(t *testing.T, root, v string) int64 {
	t.Helper()
	recs := nodetest.Numbered(v, copyKeys)
	for j, pad := 0, copyPad; pad > 0; j++ {
		val := make([]byte, min(pad, 16<<10))
		rand.Read(val)
		recs = append(recs, nodetest.Record{Key: fmt.Appendf(nil, "pad-%d", j), Value: val})
		pad -= len(val)
	}
	nodetest.WriteVersion(t, root, "d", v, copyFiles, recs)
	return dirBytes(t, filepath.Join(root, "d", v))
}

// nodeMetric sums the samples of the metric family name in n's /metrics.
func nodeMetric(client *http.Client, n *clusterProc, name string) (float64, error) {
	resp, err := client.Get(n.base + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	sum := 0.0
	for l := range strings.Lines(string(b)) {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, name+"{") && !strings.HasPrefix(l, name+" ") {
			continue
		}
		f := strings.Fields(l)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("node %d: %q: %v", n.id, l, err)
		}
		sum += v
	}
	return sum, nil
}

// mustMetric is nodeMetric, failing the test on an error.
func mustMetric(t *testing.T, client *http.Client, n *clusterProc, name string) float64 {
	t.Helper()
	v, err := nodeMetric(client, n, name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// waitConverged waits until each of nodes has converged (its start-up
// wait for a stable membership). A node writes its entry before it
// converges, so once the last one has, every view holds every node (the
// watch delivers within milliseconds): a version published then is
// assigned, and its builder chosen, over the same nodes everywhere. How
// many a node converged with depends on how fast the others started, so
// it is not checked.
func waitConverged(t *testing.T, nodes []*clusterProc) {
	t.Helper()
	for _, n := range nodes {
		waitFor(t, fmt.Sprintf("node %d converged", n.id), func() error {
			if !strings.Contains(n.log(), `"msg":"cluster membership converged"`) {
				return fmt.Errorf("not yet")
			}
			return nil
		})
	}
}

// dataDir is n's data dir (its --data-dir argument).
func (p *clusterProc) dataDir() string {
	for i, a := range p.args {
		if a == "--data-dir" && i+1 < len(p.args) {
			return p.args[i+1]
		}
	}
	return ""
}

// wipeRestart kills n (SIGKILL), empties its data dir and starts it
// again.
func wipeRestart(t *testing.T, n *clusterProc) {
	t.Helper()
	n.kill(t)
	if err := os.RemoveAll(n.dataDir()); err != nil {
		t.Fatal(err)
	}
	n.start(t)
}

// startPlainNATS starts a nats-server process with JetStream, for
// nodes that are all killed and wiped in turn.
func startPlainNATS(t *testing.T, bin string) *natsProc {
	t.Helper()
	dir := t.TempDir()
	port := natstest.FreePort(t)
	conf := fmt.Sprintf("listen: \"127.0.0.1:%d\"\njetstream { store_dir: %q }\n", port, filepath.Join(dir, "store"))
	p := &natsProc{name: "nats", url: fmt.Sprintf("nats://127.0.0.1:%d", port),
		storeDir: filepath.Join(dir, "store"), logPath: filepath.Join(dir, "nats.log")}
	p.args = []string{"-c", writeFile(t, dir, "nats.conf", conf)}
	p.start(t, bin)
	p.cleanup(t)
	return p
}

// startCopyNode starts node id (shard id, node ID n<id>, written in its
// data dir so that it keeps it when wiped: restartWiped) on the NATS
// server at url, with the [sharding] lines of startNodeProc plus
// sharding.
func startCopyNode(t *testing.T, bin, root string, id int, url string, entryTTL time.Duration, sharding string) *clusterProc {
	t.Helper()
	return startCopyNodeWith(t, bin, root, id, url, entryTTL, "", sharding)
}

// startCopyNodeWith is startCopyNode with the top-level lines top.
func startCopyNodeWith(t *testing.T, bin, root string, id int, url string, entryTTL time.Duration, top, sharding string) *clusterProc {
	t.Helper()
	dir := t.TempDir()
	config := fmt.Sprintf(`%srequire_success_file = true
shard_id = "%d"
[nats]
url = %q
cluster_name = "proc"
entry_ttl = %q
[sharding]
enabled = true
replication = 2
time_to_converge = "1s"
proxy_timeout = "2s"
%s
`, top, id, url, entryTTL, sharding)
	p := &clusterProc{id: id, bin: bin, cfgPath: filepath.Join(dir, "spangle.toml")}
	p.logOnFailure(t)
	if err := os.WriteFile(p.cfgPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	p.args = []string{"serve", "--config", p.cfgPath, "--source", root,
		"--data-dir", filepath.Join(dir, "data"), "--bind", "127.0.0.1:0", "--log-format", "json"}
	p.writeNodeID(t)
	p.start(t)
	return p
}

// writeNodeID writes n<id> as the node ID in p's data dir.
func (p *clusterProc) writeNodeID(t *testing.T) {
	t.Helper()
	if err := os.MkdirAll(p.dataDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.dataDir(), "node_id"), fmt.Appendf(nil, "n%d\n", p.id), 0o644); err != nil {
		t.Fatal(err)
	}
}

// restartWiped kills p (SIGKILL), empties its data dir but for its node
// ID, and starts it again.
func restartWiped(t *testing.T, p *clusterProc) {
	t.Helper()
	p.kill(t)
	if err := os.RemoveAll(p.dataDir()); err != nil {
		t.Fatal(err)
	}
	p.writeNodeID(t)
	p.start(t)
}

// TestPeerCopyProcesses runs "spangle serve" processes on a nats-server
// of their own, replication 2 (sequential), heal_after 1s, entries gone
// 3s after a node is killed, node IDs n1…n4 (so that which holder a copy
// tries first is known), each sending partition files at 128 KiB/s (so
// that a copy lasts long enough to be interrupted):
//
//  1. three nodes, then v1 published: one node reads the source, the
//     others copy (build once): the cluster reads about 1x the version;
//  2. node 3's partition files damaged in place, then a fourth node
//     joins: its partitions 1 and 5 are tried first from node 3 (holders
//     in node ID order, from the p-th); it refuses them (mismatch
//     counted), copies them from the other holders, and reads nothing
//     from the source;
//  3. node 3 killed (SIGKILL), wiped and started again: it copies its
//     share, reading nothing; every node serves every key right;
//  4. node 2 killed: once its entries are gone, the partitions it held
//     are healed by copies, the healers reading nothing more;
//  5. node 2 wiped and started again: the first peer that sends it a file
//     is killed; node 2 resumes from another holder, reading nothing.
func TestPeerCopyProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs nats-server and four binaries")
	}
	const entryTTL = 3 * time.Second
	const sharding = "heal_after = \"1s\"\n[cluster]\npeer_copy_bandwidth = \"128KiB\"\nbuild_once_min_size = \"0\"\n"
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	bin := buildBinary(t)
	nats := startPlainNATS(t, buildNATSServer(t))
	client := &http.Client{Timeout: testTimeout}
	var nodes []*clusterProc
	for id := 1; id <= 3; id++ {
		nodes = append(nodes, startCopyNode(t, bin, root, id, nats.url, entryTTL, sharding))
	}
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range nodes {
				t.Logf("node %d, copies and heals:\n%s", n.id, linesWith(n.log(), "peer copy", "heal", "build once"))
			}
		}
	})
	waitConverged(t, nodes)
	metric := func(n *clusterProc, name string) float64 {
		t.Helper()
		return mustMetric(t, client, n, name)
	}
	waitKeys := func(what string, nodes ...*clusterProc) {
		t.Helper()
		waitFor(t, "every key of v1 readable from "+what, func() error {
			_, err := allKeys(client, nodes, copyKeys, "v1")
			return err
		})
	}
	waitActive := func(n *clusterProc) {
		t.Helper()
		waitFor(t, fmt.Sprintf("node %d serves its share of v1", n.id), func() error {
			if st, err := ownState(client, n, "v1"); err != nil || st != "ACTIVE" {
				return fmt.Errorf("%s %v", st, err)
			}
			return nil
		})
	}

	// 1. Build once.
	size := writeCopyVersion(t, root, "v1")
	for _, n := range nodes {
		if err := n.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	waitKeys("every node", nodes...)
	read := 0.0
	for _, n := range nodes {
		read += metric(n, "spangle_source_read_bytes_total")
	}
	if read < float64(size) || read > 1.2*float64(size) {
		t.Errorf("the cluster read %v bytes of the source for v1 (%d bytes): want about once", read, size)
	}
	t.Logf("v1 (%d bytes of source): the cluster read %v", size, read)

	// 2. Node 3's files damaged; node 4 joins.
	files, err := filepath.Glob(filepath.Join(n3.dataDir(), "dbs", "d", "v1", "p-*.bolt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("node 3's partition files: %v %v", files, err)
	}
	for _, path := range files {
		nodetest.Damage(t, path)
	}
	n4 := startCopyNode(t, bin, root, 4, nats.url, entryTTL, sharding)
	nodes = append(nodes, n4)
	waitActive(n4)
	if got := metric(n4, "spangle_peer_copy_mismatches_total"); got == 0 {
		t.Error("node 4 counted no mismatch: node 3's damaged files were never tried")
	}
	if got := metric(n4, "spangle_source_read_bytes_total"); got != 0 {
		t.Errorf("node 4 read %v bytes of the source", got)
	}

	// 3. Node 3 wiped.
	restartWiped(t, n3)
	waitKeys("every node, node 3 wiped", nodes...)
	if got := metric(n3, "spangle_source_read_bytes_total"); got != 0 {
		t.Errorf("node 3, wiped, read %v bytes of the source", got)
	}
	if got := metric(n3, "spangle_peer_copy_bytes_total"); got == 0 {
		t.Error("node 3, wiped, copied nothing")
	}

	// heldTwice waits until nodes hold every partition of v1 twice.
	heldTwice := func(what string, nodes ...*clusterProc) {
		t.Helper()
		waitFor(t, what+" hold every partition of v1 twice", func() error {
			held := map[int]int{}
			for _, n := range nodes {
				parts, err := ownPartitions(client, n, "v1")
				if err != nil {
					return err
				}
				for _, p := range parts {
					held[p]++
				}
			}
			for p := range copyFiles {
				if held[p] < 2 {
					return fmt.Errorf("partitions held %v", held)
				}
			}
			return nil
		})
	}
	heldTwice("the four nodes", nodes...) // node 3's wipe healed

	// 4. Node 2 killed: heals copy.
	live := []*clusterProc{n1, n3, n4}
	before := map[*clusterProc]float64{}
	for _, n := range live {
		before[n] = metric(n, "spangle_source_read_bytes_total")
	}
	n2.kill(t)
	heldTwice("nodes 1, 3 and 4", live...)
	for _, n := range live {
		if got := metric(n, "spangle_source_read_bytes_total"); got != before[n] {
			t.Errorf("node %d read %v bytes of the source healing (%v before)", n.id, got, before[n])
		}
	}
	waitKeys("nodes 1, 3 and 4, node 2 killed", live...)

	// 5. A copy interrupted by killing the peer sending it.
	sent := map[*clusterProc]float64{}
	for _, n := range live {
		sent[n] = metric(n, "spangle_peer_copy_served_bytes_total")
	}
	if err := os.RemoveAll(n2.dataDir()); err != nil {
		t.Fatal(err)
	}
	n2.writeNodeID(t)
	n2.start(t)
	var sender *clusterProc
	waitFor(t, "a peer sends node 2 a file", func() error {
		for _, n := range live {
			if v, err := nodeMetric(client, n, "spangle_peer_copy_served_bytes_total"); err == nil && v > sent[n] {
				sender = n
				return nil
			}
		}
		return fmt.Errorf("nothing sent yet")
	})
	sender.kill(t)
	t.Logf("node %d killed while sending node 2 a file", sender.id)
	waitActive(n2)
	if got := metric(n2, "spangle_source_read_bytes_total"); got != 0 {
		t.Errorf("node 2 read %v bytes of the source", got)
	}
	if got := metric(n2, "spangle_peer_copy_resumed_total"); got == 0 {
		t.Error("node 2 resumed no copy where the killed peer's stopped")
	}
}

// TestPeerCopyTLSProcesses: with the doors on HTTPS (client certificates
// required, the peer token set), a new version is read from the source
// once by the cluster and copied by the others over HTTPS (build once),
// and a node killed, wiped and started again copies its share over
// HTTPS, reading nothing from the source.
func TestPeerCopyTLSProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three binaries")
	}
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	bin := buildBinary(t)
	ca := nodetest.NewCA(t)
	dir := t.TempDir()
	cert, key := ca.Issue(t, 2, time.Now().Add(time.Hour))
	for name, b := range map[string][]byte{"cert.pem": cert, "key.pem": key, "ca.pem": ca.PEM} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sharding := fmt.Sprintf("peer_token = \"s3cret\"\n[cluster]\nbuild_once_min_size = \"0\"\n[http]\ntls_cert = %q\ntls_key = %q\ntls_peer_ca = %q\ntls_client_ca = %q\n",
		filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.pem"))
	clientCert, err := tls.X509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{clientCert}}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: testTimeout}
	https := func(n *clusterProc) { n.base = strings.Replace(n.base, "http://", "https://", 1) }

	natsPort := natstest.FreePort(t)
	var nodes []*clusterProc
	for id := 1; id <= 3; id++ {
		n := startClusterProc(t, bin, root, id, natsPort, 2*time.Second, 3*time.Second, sharding)
		https(n)
		nodes = append(nodes, n)
	}
	waitConverged(t, nodes)
	size := writeCopyVersion(t, root, "v1")
	for _, n := range nodes {
		if err := n.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "every key of v1 readable from every node over HTTPS", func() error {
		_, err := allKeys(client, nodes, copyKeys, "v1")
		return err
	})
	read, copiers := 0.0, 0
	for _, n := range nodes {
		read += mustMetric(t, client, n, "spangle_source_read_bytes_total")
		if mustMetric(t, client, n, "spangle_peer_copy_bytes_total") > 0 {
			copiers++
		}
	}
	if read < float64(size) || read > 1.2*float64(size) || copiers != 2 {
		t.Errorf("the cluster read %v bytes of the source for v1 (%d bytes), %d nodes copied: want about once, and 2", read, size, copiers)
	}

	n3 := nodes[2]
	wipeRestart(t, n3)
	https(n3)
	waitFor(t, "every key of v1 readable from node 3, wiped, over HTTPS", func() error {
		_, err := allKeys(client, []*clusterProc{n3}, copyKeys, "v1")
		return err
	})
	if got := mustMetric(t, client, n3, "spangle_source_read_bytes_total"); got != 0 {
		t.Errorf("node 3, wiped, read %v bytes of the source", got)
	}
	if got := mustMetric(t, client, n3, "spangle_peer_copy_bytes_total"); got == 0 {
		t.Error("node 3, wiped, copied nothing")
	}
}

// TestRegionBuildOnce: a region of three nodes (replication 2) on its own
// nats-server, a leafnode of the hub, reads the versions published at the
// hub from its mirror. A version is read from the mirror about once in
// total, not once per node: one node builds, the two others copy from it
// inside the region, and the hub sends the region the version about once.
func TestRegionBuildOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs nats-server and the binary")
	}
	const bucket = "regcopy"
	bin, natsBin := buildBinary(t), buildNATSServer(t)
	hub := startHub(t, natsBin)
	server := startRegionServer(t, natsBin, "rb", "nats-leaf://"+hub.leafAddr)
	src := t.TempDir()
	size := writeCopyVersion(t, src, "v1")
	publish := publisher(t, bin, src, "nats-object://"+bucket, hub.url)
	var nodes []*clusterProc
	for id := 1; id <= 3; id++ {
		config := strings.Replace(regionBNode(id, server.url), "replication = 1", "replication = 2", 1) + "[cluster]\nbuild_once_min_size = \"0\"\n"
		nodes = append(nodes, startRegionNode(t, bin, id, bucket, config))
	}
	waitConverged(t, nodes)
	before, err := leafBytes(hub.monitor)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "publish v1 at the hub", func() error { return publish("v1") })
	for _, n := range nodes {
		waitMirror(t, fmt.Sprintf("node %d serves v1", n.id), func() error { return readAll(n.base, "v1", copyKeys) })
	}
	client := &http.Client{Timeout: testTimeout}
	read, copiers := 0.0, 0
	for _, n := range nodes {
		read += mustMetric(t, client, n, "spangle_source_read_bytes_total")
		if mustMetric(t, client, n, "spangle_peer_copy_bytes_total") > 0 {
			copiers++
		}
	}
	if read < float64(size) || read > 1.2*float64(size) || copiers != 2 {
		t.Errorf("the region's nodes read %v bytes of v1 (%d bytes) from its mirror, %d copied from a peer: want about once, and 2", read, size, copiers)
	}
	after, err := leafBytes(hub.monitor)
	if err != nil {
		t.Fatal(err)
	}
	if sent := after["rb"] - before["rb"]; float64(sent) > 1.2*float64(size) {
		t.Errorf("the hub sent the region %d bytes for a version of %d bytes: over 1.2x", sent, size)
	}
	t.Logf("v1 (%d bytes): the region's nodes read %v from its mirror; the hub sent it %d", size, read, after["rb"]-before["rb"])
}

// linesWith returns the lines of s that contain any of subs.
func linesWith(s string, subs ...string) string {
	var out []string
	for l := range strings.Lines(s) {
		for _, sub := range subs {
			if strings.Contains(l, sub) {
				out = append(out, strings.TrimSpace(l))
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
