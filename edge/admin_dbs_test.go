package edge_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/edge/internal/edgetest"
)

// TestAdminDBs removes a db missing from the source over the admin API:
// 409 while the source lists it, 404 for no such db, 405 for another
// method, then 204 once it is missing, and the db is gone.
func TestAdminDBs(t *testing.T) {
	root := t.TempDir()
	edgetest.WriteVersion(t, root, "d", "v1", 1, edgetest.Numbered("v1", 5))
	n := startPlainNode(t, root)
	ts := httptest.NewServer(edge.DBAdminHandler(n))
	defer ts.Close()
	do := func(method, path string, want int) {
		t.Helper()
		req, _ := http.NewRequest(method, ts.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d, want %d", method, path, resp.StatusCode, want)
		}
	}
	do("DELETE", "/admin/dbs/d", http.StatusConflict)
	do("DELETE", "/admin/dbs/nosuch", http.StatusNotFound)
	do("GET", "/admin/dbs/d", http.StatusMethodNotAllowed)
	do("DELETE", "/admin/dbs/", http.StatusNotFound)

	if err := os.RemoveAll(filepath.Join(root, "d")); err != nil {
		t.Fatal(err)
	}
	n.Refresh()
	edgetest.WaitFor(t, "d missing", func() error {
		if n.Status().DBs["d"].MissingSince == nil {
			return errors.New("not yet")
		}
		return nil
	})
	// The status page says so.
	page := startServer(t, n).do(t, "GET", "/")
	if !strings.Contains(page.body, "Missing from the source since") || !strings.Contains(page.body, "unless it comes back") {
		t.Errorf("the dashboard does not say d is missing:\n%s", page.body)
	}
	do("DELETE", "/admin/dbs/d", http.StatusNoContent)
	if _, ok := n.Status().DBs["d"]; ok {
		t.Fatal("d is still in the status")
	}
	do("DELETE", "/admin/dbs/d", http.StatusNotFound)
}
