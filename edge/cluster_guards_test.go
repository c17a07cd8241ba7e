package edge_test

import (
	"fmt"
	"strings"
	"testing"

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
