package edge_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spangledb/spangle/edge/internal/edgetest"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/cluster"
)

// TestClusterDeltaOverRetained: how far back a node in a cluster keeps
// bases. The version a switch replaced stays until version_remove_timeout
// passes without a lookup naming it, and a delta over it is built over
// the copy kept: with the node on v2 and v1 gone from the source, v3 (a
// delta over v1) builds, and its unchanged keys hold v1's values, not
// v2's.
func TestClusterDeltaOverRetained(t *testing.T) {
	root := t.TempDir()
	edgetest.WriteVersion(t, root, "d", "v1", 3, edgetest.Numbered("v1", 40))
	nodes := startCluster(t, clusterOpts{roots: []string{root}, replication: 1, minReplication: 1,
		versionRemoveTimeout: 10 * time.Minute})
	n := nodes[0]
	waitActive(t, nodes, "d", "v1")
	edgetest.WriteVersion(t, root, "d", "v2", 3, edgetest.Numbered("v2", 40))
	n.Refresh()
	waitActive(t, nodes, "d", "v2")
	if _, active, ok := held(n, "d", "v1"); !ok || active {
		t.Fatalf("v1 after the switch: held %v, active %v; want kept", ok, active)
	}
	if err := os.RemoveAll(filepath.Join(root, "d", "v1")); err != nil {
		t.Fatal(err)
	}

	edgetest.WriteDelta(t, root, "d", "v3", "v1", []edgetest.Record{{Key: []byte("key-1"), Value: []byte("v3:1")}}, "key-2")
	n.Refresh()
	waitActive(t, nodes, "d", "v3")
	for key, want := range map[string]string{"key-1": "v3:1", "key-2": "", "key-3": "v1:3", "key-39": "v1:39"} {
		resp, body := httpGet(t, n.HTTPURL+"/d/"+key)
		got := fmt.Sprintf("%d %s", resp.StatusCode, body)
		if want == "" && resp.StatusCode != http.StatusNotFound || want != "" && got != "200 "+want {
			t.Errorf("v3's %s: %s, want %q", key, got, want)
		}
	}
}

// TestClusterDeltaBaseLacksPartitions: node 1 holds its share of v1's
// partitions when node 2 leaves, and v2, a delta over v1, is then
// assigned every partition here, whose base is held here in part. Node 1
// keeps serving v1 and gets to v2: a first try fails naming a partition
// its v1 lacks (no peer has v2's), healing loads v1's other partitions
// here, and the next try builds v2 over them, every key right.
func TestClusterDeltaBaseLacksPartitions(t *testing.T) {
	root := t.TempDir()
	edgetest.WriteVersion(t, root, "d", "v1", 5, edgetest.Numbered("v1", 60))
	kvs, views := startClusterNATS(t, 2)
	var nodes []*clusterNode
	for i := range 2 {
		cn := &clusterNode{shard: fmt.Sprint(i + 1), view: views[i]}
		cn.Node = edgetest.StartNode(t, kvs[i], root, edgetest.Options{
			NoWait: true,
			Cluster: func(c *cluster.Config) {
				cn.configureCluster(c, 1, 1)
				c.HealAfter = time.Second
			},
			Node: func(c *node.Config) {
				cn.configure(c)
				c.RetryFailedAfter = 200 * time.Millisecond
			},
		})
		nodes = append(nodes, cn)
	}
	for _, n := range nodes {
		edgetest.WaitLoaded(t, n.Node)
	}
	waitActive(t, nodes, "d", "v1")
	a, b := nodes[0], nodes[1]
	if parts, _, _ := held(a, "d", "v1"); len(parts) == 0 || len(parts) == 5 {
		t.Fatalf("node 1 holds partitions %v of v1, want some", parts)
	}
	b.Stop(t)
	edgetest.WaitFor(t, "node 1 alone", func() error {
		if s, _ := a.view.Cluster(); s == nil || len(s.Live()) != 1 {
			return fmt.Errorf("not alone")
		}
		return nil
	})
	edgetest.WriteDelta(t, root, "d", "v2", "v1", []edgetest.Record{{Key: []byte("key-1"), Value: []byte("v2:1")}}, "key-2")
	a.Refresh()
	var failed string
	edgetest.WaitFor(t, "v2 active on node 1", func() error {
		if e := a.Status().DBs["d"].Versions["v2"].Nodes[a.Name()].Error; e != "" && failed == "" {
			failed = e
		}
		if v := activeVersion(a, "d"); v != "v2" {
			return fmt.Errorf("active %q", v)
		}
		return nil
	})
	t.Logf("v2's first try: %q", failed)
	if failed != "" && !strings.Contains(failed, "the base v1 held here lacks partition") {
		t.Errorf("v2 failed for another reason: %q", failed)
	}
	if parts, _, _ := held(a, "d", "v2"); len(parts) != 5 {
		t.Errorf("node 1 holds partitions %v of v2, want all 5", parts)
	}
	for i := range 60 {
		key := fmt.Sprint("key-", i)
		resp, body := httpGet(t, a.HTTPURL+"/d/"+key)
		want := fmt.Sprintf("200 v1:%d", i)
		switch i {
		case 1:
			want = "200 v2:1"
		case 2:
			want = "404"
		}
		got := fmt.Sprintf("%d %s", resp.StatusCode, body)
		if resp.StatusCode == http.StatusNotFound {
			got = "404"
		}
		if got != want {
			t.Errorf("v2's %s: %q, want %q", key, got, want)
		}
	}
}
