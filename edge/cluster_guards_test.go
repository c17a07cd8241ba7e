package edge_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/edge/internal/edgetest"
	"github.com/spangledb/spangle/node"
)

// TestClusterGuards: the nodes of a cluster agree on a version's guards.
// Two nodes, replication 1: each holds part of every version.
//   - v2 lacks a canary key: its partition's holder refuses v2, and the
//     other node, whose own partitions pass, does not activate it either
//     (it sees the refusal in the holder's partitions entry; its status
//     shows it);
//   - v3 has the canary but 30 records, under min_records 40, while each
//     node holds fewer than that of any version: the records the holders
//     publish per partition add up to 30, and both refuse v3;
//   - a forced pin activates v3 on both, past the refusals.
func TestClusterGuards(t *testing.T) {
	root := t.TempDir()
	edgetest.WriteVersion(t, root, "d", "v1", 5, edgetest.Numbered("v1", 60))
	canary := "key-7"
	nodes := startCluster(t, clusterOpts{roots: []string{root, root}, replication: 1, minReplication: 1,
		dbs: map[string]node.DBConfig{"d": {MinRecords: 40, CanaryKeys: []string{canary}}}})
	waitActive(t, nodes, "d", "v1")

	cp := partition(t, canary)
	holder, other := nodes[0], nodes[1]
	if parts, _, _ := held(other, "d", "v1"); contains(parts, cp) {
		holder, other = other, holder
	}
	if parts, _, _ := held(other, "d", "v1"); contains(parts, cp) {
		t.Fatalf("both nodes hold partition %d with replication 1", cp)
	}

	recs := edgetest.Numbered("v2", 60)
	recs = append(recs[:7], recs[8:]...) // no key-7
	edgetest.WriteVersion(t, root, "d", "v2", 5, recs)
	for _, n := range nodes {
		n.Refresh()
	}
	edgetest.WaitFor(t, "the holder refuses v2", func() error { return state(holder, holder, "v2", node.StateRefused) })
	edgetest.WaitFor(t, "the other node sees the refusal", func() error { return state(other, holder, "v2", node.StateRefused) })
	edgetest.WaitFor(t, "the other node holds v2", func() error {
		if _, active, ok := held(other, "d", "v2"); !ok || active {
			return fmt.Errorf("v2 held %v, active %v", ok, active)
		}
		return nil
	})
	for _, n := range nodes {
		if v := activeVersion(n, "d"); v != "v1" {
			t.Fatalf("%s activated %s, refused by %s", n.ID(), v, holder.ID())
		}
	}
	if why := nodeStatus(other, holder, "v2").Refused; !strings.Contains(why, `canary key "key-7" is missing`) {
		t.Errorf("the refusal as the other node shows it: %q", why)
	}

	edgetest.WriteVersion(t, root, "d", "v3", 5, edgetest.Numbered("v3", 30))
	for _, n := range nodes {
		n.Refresh()
	}
	for _, n := range nodes {
		edgetest.WaitFor(t, n.ID()+" refuses v3", func() error { return state(n, n, "v3", node.StateRefused) })
		if why := nodeStatus(n, n, "v3").Refused; why != "min_records: 30 records, fewer than min_records 40" {
			t.Errorf("%s refused v3 because %q", n.ID(), why)
		}
		if v := activeVersion(n, "d"); v != "v1" {
			t.Fatalf("%s activated %s", n.ID(), v)
		}
	}

	for _, n := range nodes {
		if err := n.Pin("d", node.Pin{Version: "v3", Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	waitActive(t, nodes, "d", "v3")
	checkAllKeys(t, nodes, "v3", 30)
}

func contains(ps []int, p int) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

// nodeStatus is n's status of version of db d on node of.
func nodeStatus(n, of *clusterNode, version string) node.NodeVersionStatus {
	for name, nv := range n.Status().DBs["d"].Versions[version].Nodes {
		if name == of.Name() {
			return nv
		}
	}
	return node.NodeVersionStatus{}
}

// state checks that n's status shows version of d in state on node of.
func state(n, of *clusterNode, version, want string) error {
	if got := nodeStatus(n, of, version).State; got != want {
		return fmt.Errorf("%s's status of %s on %s: %q, want %s", n.ID(), version, of.ID(), got, want)
	}
	return nil
}

// TestClusterPurgeChangedKeys: in a cluster each node purges, at its
// switch, the changed keys of the partitions it holds (two nodes,
// replication 1): between them every changed key is purged, each by the
// holder of its partition, and nothing is purged whole.
func TestClusterPurgeChangedKeys(t *testing.T) {
	root := t.TempDir()
	edgetest.WriteVersion(t, root, "d", "v1", 5, edgetest.Numbered("v1", 60))
	nodes := startCluster(t, clusterOpts{roots: []string{root, root}, replication: 1, minReplication: 1,
		node: func(c *node.Config) { c.ChangedKeys = 100 }})
	waitActive(t, nodes, "d", "v1")

	var mu sync.Mutex
	purged := map[string][]string{} // node → paths purged key by key
	whole := map[string][]string{}  // node → versions purged whole
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		n := r.Header.Get("X-Node")
		if ps := r.Header.Get("X-Paths"); ps != "" {
			purged[n] = append(purged[n], strings.Fields(ps)...)
		} else {
			whole[n] = append(whole[n], r.Header.Get("X-Version"))
		}
	}))
	defer ts.Close()
	for _, n := range nodes {
		pcfg := edge.DefaultPurgeConfig()
		pcfg.Hook = edge.PurgeHook{URL: ts.URL + "/", MaxKeys: 100,
			Headers: map[string]string{"X-Node": n.ID(), "X-Version": "{version}", "X-Paths": "{paths}"}}
		pcfg.Logger = edgetest.Logger()
		p, err := edge.NewPurger(pcfg, n.Node.Node)
		if err != nil {
			t.Fatal(err)
		}
		p.Start()
		t.Cleanup(p.Stop)
	}

	recs := edgetest.Numbered("v1", 60)
	var want []string
	for i := 0; i < 60; i += 6 {
		recs[i].Value = []byte("changed")
		want = append(want, fmt.Sprintf("/d/key-%d", i))
	}
	edgetest.WriteVersion(t, root, "d", "v2", 5, recs)
	for _, n := range nodes {
		n.Refresh()
	}
	waitActive(t, nodes, "d", "v2")
	slices.Sort(want)
	edgetest.WaitFor(t, "every changed key purged", func() error {
		mu.Lock()
		defer mu.Unlock()
		var got []string
		for _, ps := range purged {
			got = append(got, ps...)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("purged %q, want %q", got, want)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	for _, n := range nodes {
		parts, _, _ := held(n, "d", "v2")
		for _, p := range purged[n.ID()] {
			if !slices.Contains(parts, partition(t, strings.TrimPrefix(p, "/d/"))) {
				t.Errorf("%s purged %s, of a partition it does not hold (%v)", n.ID(), p, parts)
			}
		}
		if slices.Contains(whole[n.ID()], "v2") {
			t.Errorf("%s purged v2 whole", n.ID())
		}
	}
}
