package edge_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/spangledb/spangle/edge/internal/edgetest"
	"github.com/spangledb/spangle/node"
)

// pinnedGet asks n for key of db d in version over HTTP, as a peer does
// (?proxy=<version>), and returns the status and the answering version.
func pinnedGet(t *testing.T, n *clusterNode, key, version string) (int, string) {
	t.Helper()
	resp, err := http.Get(n.HTTPURL + "/d/" + key + "?proxy=" + version)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("X-Spangle-Version")
}

// TestClusterOldVersionRetention: after a switch, the old version stays
// readable by name, advertised and REMOVING while it is asked for, and is
// removed once VersionRemoveTimeout passes without a request.
func TestClusterOldVersionRetention(t *testing.T) {
	const timeout = 500 * time.Millisecond
	root := t.TempDir()
	edgetest.WriteVersion(t, root, "d", "v1", 5, edgetest.Numbered("v1", 60))
	nodes := startCluster(t, clusterOpts{roots: []string{root, root, root}, replication: 2, minReplication: 1,
		versionRemoveTimeout: timeout})
	waitActive(t, nodes, "d", "v1")

	edgetest.WriteVersion(t, root, "d", "v2", 5, edgetest.Numbered("v2", 60))
	for _, n := range nodes {
		n.Refresh()
	}
	waitActive(t, nodes, "d", "v2")

	n := nodes[0]
	parts, _, _ := held(n, "d", "v1")
	if len(parts) == 0 {
		t.Fatal("node1 dropped v1 at the switch")
	}
	key := keyIn(t, parts[0])
	if st := n.Status().DBs["d"].Versions["v1"].Nodes[n.Name()].State; st != node.StateRemoving {
		t.Fatalf("v1 state %q, want %s", st, node.StateRemoving)
	}

	// Asked for again and again over more than twice the timeout, v1
	// stays: each request restarts the timer.
	tick := time.NewTicker(timeout / 10) // pacing the requests, not waiting for an outcome
	defer tick.Stop()
	var last time.Time // when the last request was sent: the node records it while answering
	for start := time.Now(); time.Since(start) < 2*timeout; <-tick.C {
		sent := time.Now()
		if code, v := pinnedGet(t, n, key, "v1"); code != http.StatusOK || v != "v1" {
			t.Fatalf("pinned lookup of v1 %v after the switch: %d %q", time.Since(start), code, v)
		}
		last = sent
		if _, active, ok := held(n, "d", "v1"); !ok || active {
			t.Fatalf("v1 held %v, active %v while asked for", ok, active)
		}
	}
	tick.Stop()

	// Not asked for, it goes, on every node, no sooner than the timeout.
	var idle time.Duration // on n, when first seen gone
	for _, m := range nodes {
		edgetest.WaitFor(t, m.ID()+" removes v1", func() error {
			if _, _, ok := held(m, "d", "v1"); ok {
				return fmt.Errorf("v1 still held")
			}
			if m == n && idle == 0 {
				idle = time.Since(last)
			}
			if _, ok := m.Status().DBs["d"].Versions["v1"].Nodes[m.Name()]; ok {
				return fmt.Errorf("v1 still in the status")
			}
			return nil
		})
	}
	if idle < timeout {
		t.Fatalf("v1 removed %v after the last request, before the timeout %v", idle, timeout)
	}
	if code, _ := pinnedGet(t, n, key, "v1"); code != http.StatusNotImplemented {
		t.Fatalf("pinned lookup of a removed version: %d, want 501", code)
	}
	// v2 is unaffected.
	if code, v := pinnedGet(t, n, key, "v2"); code != http.StatusOK || v != "v2" {
		t.Fatalf("pinned lookup of v2: %d %q", code, v)
	}
}
