package edge_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spangledb/spangle/edge/internal/edgetest"
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

	writeDelta(t, root, "d", "v3", "v1", []edgetest.Record{{Key: []byte("key-1"), Value: []byte("v3:1")}}, "key-2")
	n.Refresh()
	waitActive(t, nodes, "d", "v3")
	for key, want := range map[string]string{"key-1": "v3:1", "key-2": "", "key-3": "v1:3", "key-39": "v1:39"} {
		resp, err := http.Get(n.HTTPURL + "/d/" + key)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got := fmt.Sprintf("%d %s", resp.StatusCode, body)
		if want == "" && resp.StatusCode != http.StatusNotFound || want != "" && got != "200 "+want {
			t.Errorf("v3's %s: %s, want %q", key, got, want)
		}
	}
}
