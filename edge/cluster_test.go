package edge_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/edge/internal/edgetest"
	"github.com/spangledb/spangle/kvwatch"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/cluster"
	"github.com/spangledb/spangle/node/kvcluster"
	"github.com/spangledb/spangle/plugins"
)

// clusterNode is one node of an in-process cluster.
type clusterNode struct {
	*edgetest.Node
	shard string
	view  *kvcluster.View
}

// clusterOpts shape startCluster.
type clusterOpts struct {
	roots          []string // one source root per node
	replication    int
	minReplication int
	partitioners   []string                 // db "d"'s partitioner per node; nil: the default
	dbs            map[string]node.DBConfig // every node's dbs settings; nil: none
	node           func(*node.Config)       // adjusts every node's configuration; nil: none
	// http adjusts each node's HTTP configuration; nil: the defaults.
	http func(*edge.Config)
	// versionRemoveTimeout is cluster.Config.VersionRemoveTimeout; 0: the default.
	versionRemoveTimeout time.Duration
}

// startCluster starts one node per root, with shard IDs "1", "2", …,
// each with its KV and view from startClusterNATS, its own data dir and
// loopback HTTP server, and waits until every node has loaded.
func startCluster(t *testing.T, o clusterOpts) []*clusterNode {
	t.Helper()
	kvs, views := startClusterNATS(t, len(o.roots))
	var nodes []*clusterNode
	for i, root := range o.roots {
		cn := &clusterNode{shard: fmt.Sprint(i + 1), view: views[i]}
		cn.Node = edgetest.StartNode(t, kvs[i], root, edgetest.Options{
			NoWait: true,
			HTTP:   o.http,
			Cluster: func(c *cluster.Config) {
				cn.configureCluster(c, o.replication, o.minReplication)
				if o.versionRemoveTimeout > 0 {
					c.VersionRemoveTimeout = o.versionRemoveTimeout
				}
			},
			Node: func(c *node.Config) {
				cn.configure(c)
				c.DBs = o.dbs
				if o.node != nil {
					o.node(c)
				}
				if o.partitioners != nil {
					c.DBs = map[string]node.DBConfig{"d": {Partitioner: o.partitioners[i]}}
				}
			},
		})
		nodes = append(nodes, cn)
	}
	for _, n := range nodes {
		edgetest.WaitLoaded(t, n.Node)
	}
	return nodes
}

// startClusterNATS starts n KVs sharing one embedded NATS server (the
// first embeds it, the others connect to it), entries living 1s, and a
// cluster view on each. They stop at cleanup, after the nodes started
// later: cleanups run last in, first out.
func startClusterNATS(t *testing.T, n int) ([]*kvwatch.KV, []*kvcluster.View) {
	t.Helper()
	kcfg := edgetest.NATSConfig(t)
	kcfg.EntryTTL = time.Second
	kcfg.Heartbeat = 200 * time.Millisecond
	kvs := []*kvwatch.KV{edgetest.StartKV(t, kcfg)}
	for range n - 1 {
		c := edgetest.NATSConfig(t, kvs[0].ClientURL())
		c.EntryTTL, c.Heartbeat = kcfg.EntryTTL, kcfg.Heartbeat
		kvs = append(kvs, edgetest.StartKV(t, c))
	}
	var views []*kvcluster.View
	for _, kv := range kvs {
		view := kvcluster.NewView(kv, edgetest.Logger())
		view.Start()
		t.Cleanup(view.Stop)
		views = append(views, view)
	}
	return kvs, views
}

// configure makes c the configuration of cn: node ID and name
// "node<shard>".
func (cn *clusterNode) configure(c *node.Config) {
	c.NodeID = "node" + cn.shard
	c.ShardID = cn.shard
	c.Name = c.NodeID
}

// configureCluster makes c cn's cluster configuration with the given
// replication: cn's view, short timings.
func (cn *clusterNode) configureCluster(c *cluster.Config, replication, minReplication int) {
	c.View = cn.view
	c.Replication = replication
	c.MinReplication = minReplication
	c.TimeToConverge = 300 * time.Millisecond
	c.ProxyTimeout = 5 * time.Second // generous under -race
}

// held returns what n holds of db's version: its partitions and whether it
// is active; ok false if n does not hold it.
func held(n *clusterNode, db, version string) (parts []int, active, ok bool) {
	hs, _ := n.Held()
	for _, h := range hs {
		if h.DB == db && h.Version == version {
			return h.Partitions, h.Active, true
		}
	}
	return nil, false, false
}

// activeVersion returns n's active version of db, "" if none.
func activeVersion(n *clusterNode, db string) string {
	hs, _ := n.Held()
	for _, h := range hs {
		if h.DB == db && h.Active {
			return h.Version
		}
	}
	return ""
}

// waitActive waits until every node answers db from version.
func waitActive(t *testing.T, nodes []*clusterNode, db, version string) {
	t.Helper()
	for _, n := range nodes {
		edgetest.WaitFor(t, n.ID()+" active on "+version, func() error {
			if v := activeVersion(n, db); v != version {
				return fmt.Errorf("active version %q", v)
			}
			return nil
		})
	}
}

// checkAllKeys reads keys key-0..key-<count-1> of db d from every node
// over HTTP and checks each value is <version>:<i>; a key whose partition
// the node does not hold must have been proxied.
func checkAllKeys(t *testing.T, nodes []*clusterNode, version string, count int) {
	t.Helper()
	proxied := 0
	for _, n := range nodes {
		parts, _, _ := held(n, "d", version)
		for i := range count {
			key := fmt.Sprintf("key-%d", i)
			resp, body := httpGet(t, n.HTTPURL+"/d/"+key)
			if resp.StatusCode != http.StatusOK || body != fmt.Sprintf("%s:%d", version, i) {
				t.Fatalf("%s: GET %s: %d %q", n.ID(), key, resp.StatusCode, body)
			}
			if v := resp.Header.Get("X-Spangle-Version"); v != version {
				t.Fatalf("%s: GET %s: version %q", n.ID(), key, v)
			}
			to := resp.Header.Get("X-Spangle-Proxied-To")
			p := partition(t, key)
			if _, local := slices.BinarySearch(parts, p); local != (to == "") {
				t.Fatalf("%s: GET %s (partition %d, held %v): proxied to %q", n.ID(), key, p, parts, to)
			}
			if to != "" {
				proxied++
				if to == strings.TrimPrefix(n.HTTPURL, "http://") {
					t.Fatalf("%s proxied %s to itself", n.ID(), key)
				}
			}
		}
	}
	if proxied == 0 {
		t.Fatal("nothing was proxied")
	}
}

// watchVersions records, per node, every active version of db it goes
// through, until the returned stop is called; stop returns the records.
func watchVersions(nodes []*clusterNode, db string) (stop func() map[string][]string) {
	var wg sync.WaitGroup
	quit := make(chan struct{})
	var mu sync.Mutex
	seen := map[string][]string{}
	for _, n := range nodes {
		wg.Go(func() {
			for {
				hs, changed := n.Held()
				for _, h := range hs {
					if h.DB == db && h.Active {
						mu.Lock()
						if s := seen[n.ID()]; len(s) == 0 || s[len(s)-1] != h.Version {
							seen[n.ID()] = append(s, h.Version)
						}
						mu.Unlock()
					}
				}
				select {
				case <-quit:
					return
				case <-changed:
				}
			}
		})
	}
	return func() map[string][]string {
		close(quit)
		wg.Wait()
		return seen
	}
}

func TestClusterAssignProxyUpgrade(t *testing.T) {
	root := t.TempDir()
	edgetest.WriteVersion(t, root, "d", "v1", 5, edgetest.Numbered("v1", 60))
	nodes := startCluster(t, clusterOpts{roots: []string{root, root, root}, replication: 2, minReplication: 1})
	waitActive(t, nodes, "d", "v1")

	// sequins' sets for 3 nodes, 5 partitions, replication 2 (SEQUINS.md §5.3).
	want := map[string][]int{"1": {0, 1, 3, 4}, "2": {0, 2, 3}, "3": {1, 2, 4}}
	for _, n := range nodes {
		if parts, _, _ := held(n, "d", "v1"); !slices.Equal(parts, want[n.shard]) {
			t.Errorf("shard %s holds %v, want %v", n.shard, parts, want[n.shard])
		}
	}
	// Every peer's partitions must be in each view before every key can
	// be proxied: the entries travel through NATS.
	for _, n := range nodes {
		edgetest.WaitFor(t, n.ID()+" sees its peers' partitions", func() error {
			return seesHolders(n, "d", "v1", len(nodes))
		})
	}
	checkAllKeys(t, nodes, "v1", 60)

	// A second version: every node switches, never going back.
	stop := watchVersions(nodes, "d")
	edgetest.WriteVersion(t, root, "d", "v2", 5, edgetest.Numbered("v2", 60))
	for _, n := range nodes {
		n.Refresh()
	}
	waitActive(t, nodes, "d", "v2")
	for id, vs := range stop() {
		if !slices.IsSorted(vs) || vs[len(vs)-1] != "v2" {
			t.Errorf("%s went through versions %v", id, vs)
		}
	}
	for _, n := range nodes {
		edgetest.WaitFor(t, n.ID()+" sees its peers' v2 partitions", func() error {
			return seesHolders(n, "d", "v2", len(nodes))
		})
	}
	checkAllKeys(t, nodes, "v2", 60)

	// A peer's request naming the version is never proxied again.
	n := nodes[2] // shard 3 does not hold partition 0
	key := keyIn(t, 0)
	resp, err := http.Get(n.HTTPURL + "/d/" + key + "?proxy=v2")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError || resp.Header.Get("X-Spangle-Proxied-To") != "" {
		t.Fatalf("pinned lookup of a partition not held: %d, proxied to %q", resp.StatusCode, resp.Header.Get("X-Spangle-Proxied-To"))
	}
}

// seesHolders reports whether n's cluster view has want nodes' partitions
// entries for db's version.
func seesHolders(n *clusterNode, db, version string, want int) error {
	s, _ := n.view.Cluster()
	if got := len(s.Holders(db, version)); got != want {
		return fmt.Errorf("%d holders of %s.%s", got, db, version)
	}
	return nil
}

// keyIn returns a key key-<i> of partition p (5 partitions).
func keyIn(t *testing.T, p int) string {
	t.Helper()
	for i := range 60 {
		k := fmt.Sprintf("key-%d", i)
		if partition(t, k) == p {
			return k
		}
	}
	t.Fatalf("no key in partition %d", p)
	return ""
}

func TestClusterMinReplication(t *testing.T) {
	// Shard 3's source lacks v2 until the end: the partitions assigned to
	// it have one replica only.
	main, late := t.TempDir(), t.TempDir()
	for _, r := range []string{main, late} {
		edgetest.WriteVersion(t, r, "d", "v1", 5, edgetest.Numbered("v1", 60))
	}
	nodes := startCluster(t, clusterOpts{roots: []string{main, main, late}, replication: 2, minReplication: 2})
	waitActive(t, nodes, "d", "v1")

	stop := watchVersions(nodes, "d")
	edgetest.WriteVersion(t, main, "d", "v2", 5, edgetest.Numbered("v2", 60))
	nodes[0].Refresh()
	nodes[1].Refresh()
	for _, n := range nodes[:2] {
		edgetest.WaitFor(t, n.ID()+" has v2 built", func() error {
			if _, active, ok := held(n, "d", "v2"); !ok || active {
				return fmt.Errorf("v2 held %v, active %v", ok, active)
			}
			return nil
		})
		edgetest.WaitFor(t, n.ID()+" sees both v2 entries", func() error { return seesHolders(n, "d", "v2", 2) })
	}
	for _, n := range nodes {
		if v := activeVersion(n, "d"); v != "v1" {
			t.Fatalf("%s switched to %s with partitions under min_replication", n.ID(), v)
		}
	}
	// The version is readable by name (as peers do) before the switch.
	parts, _, _ := held(nodes[0], "d", "v2")
	resp, err := http.Get(nodes[0].HTTPURL + "/d/" + keyIn(t, parts[0]) + "?proxy=v2")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Spangle-Version") != "v2" {
		t.Fatalf("pinned lookup of a pending version: %d %q", resp.StatusCode, resp.Header.Get("X-Spangle-Version"))
	}

	// Shard 3 builds its part: every partition reaches 2 replicas.
	edgetest.WriteVersion(t, late, "d", "v2", 5, edgetest.Numbered("v2", 60))
	nodes[2].Refresh()
	waitActive(t, nodes, "d", "v2")
	for id, vs := range stop() {
		if !slices.Equal(vs, []string{"v1", "v2"}) {
			t.Errorf("%s went through versions %v", id, vs)
		}
	}
	checkAllKeys(t, nodes, "v2", 60)
}

// partition returns the sequins partition of key among 5.
func partition(t *testing.T, key string) int {
	p, _, err := must(plugins.Builtin("sequins")).Partition([]byte(key), 5)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestClusterPartitionerMismatch: a node whose partitioner differs from the
// one a version was built with elsewhere refuses to build it, clearly.
func TestClusterPartitionerMismatch(t *testing.T) {
	main, late := t.TempDir(), t.TempDir()
	edgetest.WriteVersion(t, main, "d", "v1", 5, edgetest.Numbered("v1", 60))
	nodes := startCluster(t, clusterOpts{roots: []string{main, late}, replication: 2, minReplication: 1,
		partitioners: []string{"sequins", "murmur3"}})
	waitActive(t, nodes[:1], "d", "v1")
	edgetest.WaitFor(t, "node2 sees node1's v1 entry", func() error { return seesHolders(nodes[1], "d", "v1", 1) })

	edgetest.WriteVersion(t, late, "d", "v1", 5, edgetest.Numbered("v1", 60))
	nodes[1].Refresh()
	edgetest.WaitFor(t, "node2 refuses v1", func() error {
		st := nodes[1].Status().DBs["d"].Versions["v1"].Nodes[nodes[1].Name()]
		if st.State != node.StateError {
			return fmt.Errorf("state %q", st.State)
		}
		if !strings.Contains(st.Error, "partitioner") || !strings.Contains(st.Error, "murmur3") || !strings.Contains(st.Error, "sequins") {
			return fmt.Errorf("error %q does not say which partitioners differ", st.Error)
		}
		return nil
	})
	// node1 still serves every key, none of them through node2.
	for i := range 60 {
		resp, err := http.Get(fmt.Sprintf("%s/d/key-%d", nodes[0].HTTPURL, i))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Spangle-Proxied-To") != "" {
			t.Fatalf("key-%d: %d via %q", i, resp.StatusCode, resp.Header.Get("X-Spangle-Proxied-To"))
		}
	}
}

// TestClusterEntriesVanish: a peer's entries leave the KV (as when a NATS
// outage outlasts their TTL) while the peer still serves. Lookups of the
// partitions only it holds keep going to it, from the holders the node
// saw last, instead of failing until the entries are written again.
func TestClusterEntriesVanish(t *testing.T) {
	root := t.TempDir()
	edgetest.WriteVersion(t, root, "d", "v1", 5, edgetest.Numbered("v1", 60))
	nodes := startCluster(t, clusterOpts{roots: []string{root, root}, replication: 1, minReplication: 1})
	waitActive(t, nodes, "d", "v1")
	for _, n := range nodes {
		edgetest.WaitFor(t, n.ID()+" sees its peer's partitions", func() error { return seesHolders(n, "d", "v1", 2) })
	}
	checkAllKeys(t, nodes[1:], "v1", 60) // node 1's proxy cache stays cold

	// Node 2's KV stops: its entries are deleted, its HTTP serves on.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := nodes[1].KV.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	edgetest.WaitFor(t, "node 1 to see node 2's entries gone", func() error { return seesHolders(nodes[0], "d", "v1", 1) })
	checkAllKeys(t, nodes[:1], "v1", 60)
}
