package edge_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/edge/internal/edgetest"
	"github.com/spangledb/spangle/node"
)

// TestPurgeDeltaKeys: a switch to a delta version purges exactly the
// keys the delta changed (those its build noted: added, given another
// value, deleted), not a key it upserted with the value it had, nor a
// deleted key the base lacked.
func TestPurgeDeltaKeys(t *testing.T) {
	root := t.TempDir()
	edgetest.WriteVersion(t, root, "d", "v1", 2, edgetest.Numbered("v1", 10))
	n := startPlainNode(t, root, func(c *node.Config) { c.ChangedKeys = 10 })

	var mu sync.Mutex
	var paths []string
	versions := map[string]bool{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		versions[r.Header.Get("X-Version")] = true
		if r.Header.Get("X-Version") == "v2" {
			paths = append(paths, strings.Fields(r.Header.Get("X-Paths"))...)
		}
	}))
	defer ts.Close()
	reg := prometheus.NewRegistry()
	pcfg := edge.DefaultPurgeConfig()
	pcfg.Hook = edge.PurgeHook{URL: ts.URL + "/", Method: "BAN", MaxKeys: 10,
		Headers: map[string]string{"X-Version": "{version}", "X-Paths": "{paths}"}}
	pcfg.Registerer = reg
	pcfg.Logger = edgetest.Logger()
	p, err := edge.NewPurger(pcfg, n)
	if err != nil {
		t.Fatal(err)
	}
	p.Start()
	defer p.Stop()
	edgetest.WaitFor(t, "the purge of v1", func() error {
		mu.Lock()
		defer mu.Unlock()
		if !versions["v1"] {
			return fmt.Errorf("no purge of v1")
		}
		return nil
	})

	edgetest.WriteDelta(t, root, "d", "v2", "v1", []edgetest.Record{
		{Key: []byte("key-1"), Value: []byte("v2")},   // changed
		{Key: []byte("key-2"), Value: []byte("v1:2")}, // upserted unchanged
		{Key: []byte("new-1"), Value: []byte("v2")},   // added
	}, "key-5", "never-there")
	n.Refresh()
	edgetest.WaitFor(t, "v2's keys purged", func() error {
		if got := counterOf(t, reg, "spangle_purge_keys_total", "db", "d"); got != 3 {
			return fmt.Errorf("%v keys purged, want 3", got)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(paths)
	if want := []string{"/d/key-1", "/d/key-5", "/d/new-1"}; !slices.Equal(paths, want) {
		t.Errorf("v2 purged %q, want %q", paths, want)
	}
}
