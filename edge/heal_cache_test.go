package edge_test

import (
	"fmt"
	"net/http"
	"testing"
)

// TestClusterHealCacheProxied: node1 caches an answer it proxied to a
// peer (the key is asked three times: the second miss is cached, the
// third is a hit); node3 leaves, node1 heals the key's partition, and
// the key is answered locally from then on, not from the cached peer's
// answer (the answer cache is consulted before reading: a version's
// answers from peers are dropped when it heals their partitions).
func TestClusterHealCacheProxied(t *testing.T) {
	nodes := startHealCluster(t, []healOpts{{}, {}, {}})
	n := nodes[0]
	get := func(i int) (proxiedTo string) {
		t.Helper()
		resp, body := httpGet(t, fmt.Sprintf("%s/d/key-%d", n.HTTPURL, i))
		if resp.StatusCode != http.StatusOK || body != fmt.Sprintf("v1:%d", i) {
			t.Fatalf("GET key-%d: %d %q", i, resp.StatusCode, body)
		}
		return resp.Header.Get("X-Spangle-Proxied-To")
	}
	// A key node1 does not hold: its partition is one node3 held, which
	// node1 heals.
	key := -1
	for i := range healKeys {
		if get(i) != "" {
			key = i
			break
		}
	}
	if key < 0 {
		t.Fatal("node1 proxied no key")
	}
	hits := func() float64 { return n.metric(t, "spangle_hot_cache_hits_total") }
	get(key) // cached
	before := hits()
	if get(key) == "" || hits() != before+1 {
		t.Fatalf("key-%d: not a cached proxied answer (%v hits)", key, hits()-before)
	}

	nodes[2].Stop(t)
	all := []int{0, 1, 2, 3, 4, 5}
	waitHealed(t, nodes[:2], [][]int{all, all})
	for range 3 {
		if peer := get(key); peer != "" {
			t.Fatalf("key-%d, healed on node1: still proxied to %s", key, peer)
		}
	}
	if got := n.metric(t, "spangle_hot_cache_dropped_total"); got < 1 {
		t.Errorf("no cached answer dropped at the heal (%v)", got)
	}
}
