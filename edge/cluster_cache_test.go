package edge_test

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/edge/internal/edgetest"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/cluster"
	"github.com/spangledb/spangle/node/nodetest"
)

// TestClusterCacheProxied: a proxied answer goes into the node's answer
// cache, so that a key of a partition held by a peer is asked of the peer
// once and answered from the cache afterwards, by the HTTP and the NATS
// doors alike, naming the peer that answered, also once the peer has
// left. When a new version becomes active, the cached answer of the old version is
// never served: the key is answered from the new version (held here
// now), and the old version's entries are dropped.
func TestClusterCacheProxied(t *testing.T) {
	root := t.TempDir()
	edgetest.WriteVersion(t, root, "d", "v1", 5, edgetest.Numbered("v1", 60))
	kvs, views := startClusterNATS(t, 2)
	var nodes []*clusterNode
	var regs []*prometheus.Registry
	for i := range 2 {
		cn := &clusterNode{shard: fmt.Sprint(i + 1), view: views[i]}
		reg := prometheus.NewRegistry()
		cn.Node = edgetest.StartNode(t, kvs[i], root, edgetest.Options{
			NoWait:  true,
			Cluster: func(c *cluster.Config) { cn.configureCluster(c, 1, 1) },
			Node: func(c *node.Config) {
				cn.configure(c)
				c.Registerer = reg
			},
		})
		nodes, regs = append(nodes, cn), append(regs, reg)
	}
	for _, n := range nodes {
		edgetest.WaitLoaded(t, n.Node)
	}
	waitActive(t, nodes, "d", "v1")
	for _, n := range nodes {
		edgetest.WaitFor(t, n.ID()+" sees its peers' partitions", func() error { return seesHolders(n, "d", "v1", 2) })
	}
	a, b, reg := nodes[0], nodes[1], regs[0]
	parts, _, _ := held(a, "d", "v1")
	key, i := "", 0
	for ; i < 60; i++ {
		if k := fmt.Sprintf("key-%d", i); !slices.Contains(parts, partition(t, k)) {
			key = k
			break
		}
	}
	if key == "" {
		t.Fatalf("node1 holds every partition (%v)", parts)
	}
	get := func() (version, proxiedTo, body string) {
		t.Helper()
		resp, data := httpGet(t, a.HTTPURL+"/d/"+key)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", key, resp.StatusCode)
		}
		return resp.Header.Get("X-Spangle-Version"), resp.Header.Get("X-Spangle-Proxied-To"), data
	}
	peer := strings.TrimPrefix(b.HTTPURL, "http://")
	asked := func() float64 { return nodetest.Metric(t, reg, "spangle_proxy_requests_total", "outcome", "ok") }
	hits := func() float64 { return nodetest.Metric(t, reg, "spangle_hot_cache_hits_total") }

	// Missed twice (the second miss is cached), then a hit.
	for n := range 3 {
		before, hitsBefore := asked(), hits()
		v, proxiedTo, body := get()
		if v != "v1" || proxiedTo != peer || body != "v1:"+strconv.Itoa(i) {
			t.Fatalf("lookup %d: version %q, proxied to %q (node2 is %s), body %q", n, v, proxiedTo, peer, body)
		}
		if want := float64(min(1, 2-n)); asked()-before != want || hits()-hitsBefore != 1-want {
			t.Fatalf("lookup %d: asked the peer %v times, %v hits; want %v asks", n, asked()-before, hits()-hitsBefore, want)
		}
	}
	// node2 leaves; version v2 is built here, holding every partition.
	b.Stop(t)
	edgetest.WaitFor(t, "node1 alone", func() error {
		if s, _ := a.view.Cluster(); s == nil || len(s.Live()) != 1 {
			return fmt.Errorf("not alone")
		}
		return nil
	})
	// The NATS door's lookups use the same cache (node1 alone answers
	// them now): v1 is still active, and its answer cached.
	nc := edgetest.Connect(t, a.KV.ClientURL())
	before, hitsBefore := asked(), hits()
	m, err := nc.Request("spangle.test.get.d", []byte(key), 5*time.Second)
	if err != nil || string(m.Data) != "v1:"+strconv.Itoa(i) {
		t.Fatalf("NATS get: %v, %v", m, err)
	}
	if asked() != before || hits() != hitsBefore+1 {
		t.Fatalf("NATS get asked the peer %v times, %v hits; want a hit", asked()-before, hits()-hitsBefore)
	}

	edgetest.WriteVersion(t, root, "d", "v2", 5, edgetest.Numbered("v2", 60))
	a.Refresh()
	waitActive(t, nodes[:1], "d", "v2")
	for range 3 {
		if v, proxiedTo, body := get(); v != "v2" || proxiedTo != "" || body != "v2:"+strconv.Itoa(i) {
			t.Fatalf("after the switch: version %q, proxied to %q, body %q", v, proxiedTo, body)
		}
	}
	if dropped := nodetest.Metric(t, reg, "spangle_hot_cache_dropped_total"); dropped < 1 {
		t.Errorf("%v entries dropped: v1's proxied answer is still cached", dropped)
	}
}
