package edge_test

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/spangledb/spangle/edge/internal/edgetest"
	"github.com/spangledb/spangle/node/cluster"
)

// nodeServer is a testServer for an in-process cluster node's HTTP door.
func nodeServer(n *clusterNode) *testServer {
	return &testServer{url: n.HTTPURL, client: &http.Client{}}
}

// TestClusterList: with replication 1 every node lacks most partitions,
// so every listing fans out to the other nodes; complete listings from
// each node, at several page sizes, prefixes and ranges, equal the
// sorted source keys. A cursor keeps its version across a switch while a
// node retains it.
func TestClusterList(t *testing.T) {
	root := t.TempDir()
	recs := listKeysRecords("v1", 400)
	edgetest.WriteVersion(t, root, "d", "v1", 6, recs)
	nodes := startCluster(t, clusterOpts{roots: []string{root, root, root}, replication: 1, minReplication: 1})
	waitActive(t, nodes, "d", "v1")
	for _, n := range nodes {
		edgetest.WaitFor(t, n.ID()+" sees its peers' partitions", func() error { return seesHolders(n, "d", "v1", len(nodes)) })
		if parts, _, _ := held(n, "d", "v1"); len(parts) == 6 {
			t.Fatalf("%s holds every partition: nothing to fan out", n.ID())
		}
	}
	want := map[string]string{}
	var all []string
	for _, r := range recs {
		want[string(r.Key)] = string(r.Value)
		all = append(all, string(r.Key))
	}
	sort.Strings(all)
	all = slices.Compact(all)
	for _, n := range nodes {
		ts := nodeServer(n)
		for _, tc := range []struct{ prefix, start, end, limit string }{
			{limit: "1000"}, {limit: "1"}, {limit: "33"}, {prefix: "u/07/", limit: "2"}, {prefix: "\xff", limit: "10"},
			{start: "u/03", end: "u/05", limit: "7"}, {prefix: "none", limit: "5"},
		} {
			q := url.Values{"limit": {tc.limit}, "values": {"1"}}
			for k, v := range map[string]string{"prefix": tc.prefix, "start": tc.start, "end": tc.end} {
				if v != "" {
					q.Set(k, v)
				}
			}
			var exp []string
			for _, k := range all {
				if strings.HasPrefix(k, tc.prefix) && k >= tc.start && (tc.end == "" || k < tc.end) {
					exp = append(exp, k)
				}
			}
			keys, vals, version := httpListAll(t, ts, "d", q)
			if (len(exp) > 0 && version != "v1") || !slices.Equal(keys, exp) {
				t.Fatalf("%s %+v: version %s, %d keys, want %d", n.ID(), tc, version, len(keys), len(exp))
			}
			for i, v := range vals {
				if v != want[keys[i]] {
					t.Fatalf("%s: value of %q = %q, want %q", n.ID(), keys[i], v, want[keys[i]])
				}
			}
		}
	}

	// A listing across a version switch: its cursor keeps reading v1,
	// retained by every node, to the end.
	ts := nodeServer(nodes[0])
	first := ts.do(t, "GET", "/d/?limit=50")
	var p listPage
	if err := jsonPage(first.body, &p); err != nil || p.Cursor == "" || p.Version != "v1" {
		t.Fatalf("first page: %s %v", first.body, err)
	}
	edgetest.WriteVersion(t, root, "d", "v2", 6, listKeysRecords("v2", 100))
	for _, n := range nodes {
		n.Refresh()
	}
	waitActive(t, nodes, "d", "v2")
	rest, _, version := httpListAll(t, nodeServer(nodes[1]), "d", url.Values{"limit": {"50"}, "cursor": {p.Cursor}})
	got := append(append([]string(nil), p.Keys...), rest...)
	if version != "v1" || len(got) != len(all) {
		t.Fatalf("a listing across the switch: version %s, %d keys, want v1 and %d", version, len(got), len(all))
	}
}

// TestClusterListStalledPeer: a peer that accepts connections and never
// answers cannot hold a listing past proxy_list_timeout: 504 naming the
// partitions missing, never a short page.
func TestClusterListStalledPeer(t *testing.T) {
	root := t.TempDir()
	edgetest.WriteVersion(t, root, "d", "v1", 4, listKeysRecords("v1", 100))
	kvs, views := startClusterNATS(t, 2)
	var nodes []*clusterNode
	for i := range 2 {
		cn := &clusterNode{shard: string(rune('1' + i)), view: views[i]}
		cn.Node = edgetest.StartNode(t, kvs[i], root, edgetest.Options{
			NoWait: true,
			Cluster: func(c *cluster.Config) {
				cn.configureCluster(c, 1, 1)
				c.ProxyListTimeout = 300 * time.Millisecond
			},
			Node: cn.configure,
		})
		nodes = append(nodes, cn)
	}
	waitActive(t, nodes, "d", "v1")
	for _, n := range nodes {
		edgetest.WaitFor(t, n.ID()+" sees its peer", func() error { return seesHolders(n, "d", "v1", 2) })
	}
	// Node 2's HTTP door goes; a listener that never answers takes its
	// address (its entries still name it).
	addr := strings.TrimPrefix(nodes[1].HTTPURL, "http://")
	nodes[1].Stop(t)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot take over %s: %v", addr, err)
	}
	defer l.Close()
	stalled := make(chan struct{})
	defer close(stalled)
	go func() { // owned: ends when l closes
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { <-stalled; c.Close() }() // owned: ends with the test
		}
	}()
	parts, _, _ := held(nodes[0], "d", "v1")
	start := time.Now()
	resp := nodeServer(nodes[0]).do(t, "GET", "/d/?limit=1000")
	if resp.status != http.StatusGatewayTimeout || !strings.Contains(resp.body, "partitions [") {
		t.Fatalf("a listing with a stalled peer: %d %q, want 504 naming partitions", resp.status, resp.body)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the listing took %v, past proxy_list_timeout", d)
	}
	for p := range 4 {
		if !slices.Contains(parts, p) && !strings.Contains(resp.body, string(rune('0'+p))) {
			t.Errorf("the 504 %q does not name partition %d", resp.body, p)
		}
	}
}

// TestClusterListVersionElsewhere: a cursor's version that this node has
// removed, but other nodes still hold, is read from them; once no node
// holds it, 410.
func TestClusterListVersionElsewhere(t *testing.T) {
	root := t.TempDir()
	edgetest.WriteVersion(t, root, "d", "v1", 6, listKeysRecords("v1", 200))
	kvs, views := startClusterNATS(t, 3)
	var nodes []*clusterNode
	for i := range 3 {
		cn := &clusterNode{shard: string(rune('1' + i)), view: views[i]}
		cn.Node = edgetest.StartNode(t, kvs[i], root, edgetest.Options{
			NoWait: true,
			Cluster: func(c *cluster.Config) {
				cn.configureCluster(c, 2, 1)
				c.VersionRemoveTimeout = time.Hour
				if i == 2 {
					c.VersionRemoveTimeout = time.Second // node 3 drops v1 soon after the switch
				}
			},
			Node: cn.configure,
		})
		nodes = append(nodes, cn)
	}
	waitActive(t, nodes, "d", "v1")
	for _, n := range nodes {
		edgetest.WaitFor(t, n.ID()+" sees its peers", func() error { return seesHolders(n, "d", "v1", 3) })
	}
	var p listPage
	first := nodeServer(nodes[2]).do(t, "GET", "/d/?limit=20")
	if err := jsonPage(first.body, &p); err != nil || p.Cursor == "" {
		t.Fatalf("first page: %s %v", first.body, err)
	}
	edgetest.WriteVersion(t, root, "d", "v2", 6, listKeysRecords("v2", 50))
	for _, n := range nodes {
		n.Refresh()
	}
	waitActive(t, nodes, "d", "v2")
	edgetest.WaitFor(t, "node3 removes v1", func() error {
		if _, _, ok := held(nodes[2], "d", "v1"); ok {
			return fmt.Errorf("still held")
		}
		return nil
	})
	edgetest.WaitFor(t, "node3 sees v1 on the others only", func() error { return seesHolders(nodes[2], "d", "v1", 2) })
	rest, _, version := httpListAll(t, nodeServer(nodes[2]), "d", url.Values{"limit": {"20"}, "cursor": {p.Cursor}})
	if version != "v1" || len(p.Keys)+len(rest) != 200 {
		t.Fatalf("the rest of v1 from node3 after it removed v1: version %s, %d+%d keys, want 200", version, len(p.Keys), len(rest))
	}
}
