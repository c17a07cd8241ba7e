package edge_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/edge/internal/edgetest"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/cluster"
	"github.com/spangledb/spangle/node/nodetest"
)

// Peer copies over real NATS and HTTP (issue 35): 3 nodes, replication 3
// (each holds the 6 partitions of d/v1, about 90 KB each, values that do
// not compress), healing off. node3 is stopped, its data dir wiped, and
// started again: it must load v1 by copying its partitions from node1 and
// node2, reading nothing from the source.
const copyKeys = 3000

func copyValue(i int) string {
	return fmt.Sprintf("%x", sha256.Sum256(fmt.Appendf(nil, "%d", i))) + fmt.Sprintf("%x", sha256.Sum256(fmt.Appendf(nil, "v%d", i)))
}

func startCopyCluster(t *testing.T, opts []healOpts) []*healNode {
	t.Helper()
	root := t.TempDir()
	recs := make([]nodetest.Record, copyKeys)
	for i := range recs {
		recs[i] = nodetest.Record{Key: fmt.Appendf(nil, "key-%d", i), Value: []byte(copyValue(i))}
	}
	edgetest.WriteVersion(t, root, "d", "v1", healParts, recs)
	for i := range opts {
		opts[i].replication, opts[i].disable = 3, true
	}
	return startHealClusterOn(t, root, opts)
}

// wipeRestart stops hn, empties its data dir and starts it again, and
// waits until it holds every partition of d/v1 and serves it.
func wipeRestart(t *testing.T, hn *healNode) {
	t.Helper()
	hn.Node.Stop(t)
	hn.data = t.TempDir()
	hn.start(t)
	edgetest.WaitLoaded(t, hn.Node)
	edgetest.WaitFor(t, hn.ID()+" holds d/v1", func() error {
		if parts, _, ok := held(hn.clusterNode, "d", "v1"); !ok || len(parts) != healParts {
			return fmt.Errorf("holds %v", parts)
		}
		return nil
	})
	waitActive(t, []*clusterNode{hn.clusterNode}, "d", "v1")
}

// damagePart damages hn's file of partition p of d/v1 in place
// (nodetest.Damage).
func damagePart(t *testing.T, hn *healNode, p int) {
	t.Helper()
	nodetest.Damage(t, filepath.Join(hn.data, "dbs", "d", "v1", fmt.Sprintf("p-%05d.bolt", p)))
}

// checkCopyKeys reads every key from n over HTTP.
func checkCopyKeys(t *testing.T, n *healNode) {
	t.Helper()
	for i := 0; i < copyKeys; i += 7 {
		resp, b := httpGet(t, fmt.Sprintf("%s/d/key-%d", n.HTTPURL, i))
		if resp.StatusCode != 200 || b != copyValue(i) {
			t.Fatalf("%s key-%d: %d %q", n.ID(), i, resp.StatusCode, b)
		}
	}
}

// copyMetric is the value of spangle_peer_copy_bytes_total{result} on hn.
func copyMetric(t *testing.T, hn *healNode, result string) float64 {
	t.Helper()
	mfs, err := hn.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "spangle_peer_copy_bytes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestPeerCopyWipedNode: the restarted node reads 0 bytes from the
// source, copies every partition from its peers, and serves them.
func TestPeerCopyWipedNode(t *testing.T) {
	nodes := startCopyCluster(t, make([]healOpts, 3))
	n3 := nodes[2]
	if got := sourceReads(t, nodes); got == 0 {
		t.Fatalf("the first build read %v bytes from the source", got)
	}
	wipeRestart(t, n3)
	if got := n3.metric(t, "spangle_source_read_bytes_total"); got != 0 {
		t.Errorf("the wiped node read %v bytes from the source", got)
	}
	if got := copyMetric(t, n3, "ok"); got < healParts*32<<10 {
		t.Errorf("copied %v bytes from peers", got)
	}
	checkCopyKeys(t, n3)
}

// TestPeerCopyCorrupt: node1's partition files are damaged in place (same
// size, the manifest unchanged): the wiped node3 refuses each it copies
// from node1 (counted as mismatch), copies it again from node2, and
// serves only good data, still without reading the source.
func TestPeerCopyCorrupt(t *testing.T) {
	nodes := startCopyCluster(t, make([]healOpts, 3))
	n1, n3 := nodes[0], nodes[2]
	for p := range healParts {
		damagePart(t, n1, p)
	}
	wipeRestart(t, n3)
	if got := copyMetric(t, n3, "mismatch"); got == 0 {
		t.Error("no mismatch counted: node1's damaged files were never tried")
	}
	if got := n3.metric(t, "spangle_peer_copy_mismatches_total"); got == 0 {
		t.Error("spangle_peer_copy_mismatches_total is 0")
	}
	if got := n3.metric(t, "spangle_source_read_bytes_total"); got != 0 {
		t.Errorf("read %v bytes from the source", got)
	}
	checkCopyKeys(t, n3)
}

// TestPeerCopyInterrupted: node1 sends at the floor of
// peer_copy_bandwidth; once it has started sending to the wiped node3,
// its door is killed (connections closed at once). node3 finishes from
// node2 (resuming where node1 stopped) without reading the source.
func TestPeerCopyInterrupted(t *testing.T) {
	slow := func(c *edge.Config) { c.PeerCopyBandwidth = 64 << 10 }
	nodes := startCopyCluster(t, []healOpts{{http: slow}, {}, {}})
	n1, n3 := nodes[0], nodes[2]
	// served is what node1's door has sent to copiers (its own registry):
	// the first build's copies (build once) count too.
	served := func() (float64, error) {
		resp, err := http.Get(n1.HTTPURL + "/metrics")
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return 0, err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "spangle_peer_copy_served_bytes_total "); ok {
				return strconv.ParseFloat(v, 64)
			}
		}
		return 0, nil
	}
	before, err := served()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		wipeRestart(t, n3)
	}()
	edgetest.WaitFor(t, "node1 sends a partition file", func() error {
		if now, err := served(); err != nil || now <= before {
			return fmt.Errorf("nothing sent yet (%v)", err)
		}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = n1.HTTP.Shutdown(ctx) // the door dies: its connections close now
	<-done
	if t.Failed() {
		return
	}
	if got := n3.metric(t, "spangle_source_read_bytes_total"); got != 0 {
		t.Errorf("read %v bytes from the source", got)
	}
	if got := n3.metric(t, "spangle_peer_copy_resumed_total"); got == 0 {
		t.Error("no copy resumed from where node1's stopped")
	}
	checkCopyKeys(t, n3)
}

// TestPeerCopyNoHolder: with both peers' doors dead, the wiped node builds
// d/v1 from the source, as it would without peers.
func TestPeerCopyNoHolder(t *testing.T) {
	nodes := startCopyCluster(t, make([]healOpts, 3))
	n3 := nodes[2]
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, n := range nodes[:2] {
		_ = n.HTTP.Shutdown(ctx)
	}
	wipeRestart(t, n3)
	if got := n3.metric(t, "spangle_source_read_bytes_total"); got == 0 {
		t.Error("read nothing from the source")
	}
	if got := copyMetric(t, n3, "ok"); got != 0 {
		t.Errorf("copied %v bytes", got)
	}
	checkCopyKeys(t, n3)
}

// TestPeerCopyTLS: with the doors on HTTPS, client certificates required
// and the peer token set, the wiped node copies over HTTPS (the cluster's
// PeerTLS, as spangle serve sets it from [http] tls_*), reading nothing
// from the source.
func TestPeerCopyTLS(t *testing.T) {
	ca := nodetest.NewCA(t)
	dir := t.TempDir()
	c, k := ca.Issue(t, 2, time.Now().Add(time.Hour))
	tc := edge.DefaultTLSConfig()
	tc.CertFile, tc.KeyFile, tc.ClientCAFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "ca.pem")
	writeFile(t, tc.CertFile, c)
	writeFile(t, tc.KeyFile, k)
	writeFile(t, tc.ClientCAFile, ca.PEM)
	tc.PeerCAFile = tc.ClientCAFile
	tl, err := edge.NewTLS(tc)
	if err != nil {
		t.Fatal(err)
	}
	o := healOpts{
		http:    func(c *edge.Config) { c.TLS, c.PeerToken = tl.ServerConfig(), "s3cret" },
		cluster: func(c *cluster.Config) { c.PeerTLS, c.PeerToken = tl.PeerConfig, "s3cret" },
	}
	nodes := startCopyCluster(t, []healOpts{o, o, o})
	n3 := nodes[2]
	wipeRestart(t, n3)
	if got := n3.metric(t, "spangle_source_read_bytes_total"); got != 0 {
		t.Errorf("read %v bytes from the source", got)
	}
	if got := copyMetric(t, n3, "ok"); got == 0 {
		t.Error("copied nothing")
	}
	for i := 0; i < copyKeys; i += 7 {
		res, err := n3.Get(context.Background(), "d", fmt.Appendf(nil, "key-%d", i), node.GetOptions{})
		if err != nil || string(res.Value) != copyValue(i) {
			t.Fatalf("key-%d: %q, %v", i, res.Value, err)
		}
	}
}
