package edge_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/edge/internal/edgetest"
	"github.com/spangledb/spangle/node"
)

// TestDoorsForgetRemovedDB: once a db is removed (missing from the source,
// then DELETE /admin/dbs), the HTTP door drops its db= series from
// /metrics and its handle (cached headers, hot-version pointer), and the
// NATS door its cached reply headers; the other db keeps them. Before,
// they stayed for the life of the process.
func TestDoorsForgetRemovedDB(t *testing.T) {
	root := t.TempDir()
	for _, db := range []string{"d", "e"} {
		edgetest.WriteVersion(t, root, db, "v1", 2, edgetest.Numbered("v1", 10))
	}
	kv := edgetest.StartKV(t, edgetest.NATSConfig(t))
	reg := prometheus.NewRegistry()
	n := edgetest.StartNode(t, kv, root, edgetest.Options{
		Node: func(c *node.Config) { c.RemoveMissingAfter = -1 },
		HTTP: func(c *edge.Config) { c.Registerer = reg },
	})
	nc := edgetest.Connect(t, kv.ClientURL())
	lookups := func() {
		t.Helper()
		for _, db := range []string{"d", "e"} {
			resp, err := http.Get(n.HTTPURL + "/" + db + "/key-1")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("GET /%s/key-1: %d", db, resp.StatusCode)
			}
			if m, err := nc.Request("spangle."+edgetest.Cluster+".get."+db, []byte("key-1"), 5*time.Second); err != nil || string(m.Data) != "v1:1" {
				t.Fatalf("NATS get %s: %v", db, err)
			}
		}
	}
	metrics := func() string {
		t.Helper()
		resp, err := http.Get(n.HTTPURL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	lookups()
	if m := metrics(); !strings.Contains(m, `db="e"`) || !strings.Contains(m, `db="d"`) {
		t.Fatalf("/metrics lacks the dbs' series")
	}
	if got := n.HTTP.HandleDBs(); !slices.Equal(got, []string{"d", "e"}) {
		t.Fatalf("HTTP handles %v", got)
	}
	if got := n.NATS.HeaderDBs(); !slices.Equal(got, []string{"d", "e"}) {
		t.Fatalf("NATS header caches %v", got)
	}

	if err := os.RemoveAll(filepath.Join(root, "e")); err != nil {
		t.Fatal(err)
	}
	n.Refresh()
	edgetest.WaitFor(t, "e missing", func() error {
		if n.Status().DBs["e"].MissingSince == nil {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	if got := n.HTTP.HandleDBs(); !slices.Equal(got, []string{"d", "e"}) {
		t.Fatalf("HTTP handles %v while e is missing but served", got)
	}
	if err := n.RemoveDB("e"); err != nil {
		t.Fatal(err)
	}
	edgetest.WaitFor(t, "e forgotten by both doors", func() error {
		if m := metrics(); strings.Contains(m, `db="e"`) {
			return fmt.Errorf("/metrics still has db=\"e\" series")
		}
		if got := n.HTTP.HandleDBs(); !slices.Equal(got, []string{"d"}) {
			return fmt.Errorf("HTTP handles %v", got)
		}
		if got := n.NATS.HeaderDBs(); !slices.Equal(got, []string{"d"}) {
			return fmt.Errorf("NATS header caches %v", got)
		}
		return nil
	})
	if m := metrics(); !strings.Contains(m, `db="d"`) {
		t.Fatal("d's series went too")
	}
}
