package edge_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/edge/internal/edgetest"
	"github.com/spangledb/spangle/node"
)

// TestAdminPins drives a node's pins over the admin API: a rollback by
// version and by "before", the pins listed, an unpin, and bad requests.
func TestAdminPins(t *testing.T) {
	root := t.TempDir()
	for _, v := range []string{"v1", "v2", "v3"} {
		edgetest.WriteVersion(t, root, "d", v, 2, edgetest.Numbered(v, 10))
	}
	n := startPlainNode(t, root)
	ts := httptest.NewServer(edge.AdminHandler(n))
	defer ts.Close()
	serves := func(version string) func() error { return servesVersion(n, "d", version) }
	do := func(method, path string, want int) string {
		t.Helper()
		req, _ := http.NewRequest(method, ts.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, body, want)
		}
		return string(body)
	}
	edgetest.WaitFor(t, "v3", serves("v3"))
	do("PUT", "/admin/pins/d?version=v1", 204)
	edgetest.WaitFor(t, "v1", serves("v1"))
	if got := do("GET", "/admin/pins", 200); got != `{"d":{"version":"v1"}}`+"\n" {
		t.Errorf("pins: %s", got)
	}
	do("PUT", "/admin/pins/d?version=v1&force=true", 204)
	if got := do("GET", "/admin/pins", 200); got != `{"d":{"version":"v1","force":true}}`+"\n" {
		t.Errorf("pins after a forced pin: %s", got)
	}
	do("PUT", "/admin/pins/d?version=v1&force=maybe", 400)
	do("PUT", "/admin/pins/d?before=v3&force=true", 400)
	do("PUT", "/admin/pins/d?before=v3", 204)
	edgetest.WaitFor(t, "v2", serves("v2"))
	do("DELETE", "/admin/pins/d", 204)
	edgetest.WaitFor(t, "v3 again", serves("v3"))
	do("PUT", "/admin/pins/d", 400)
	do("PUT", "/admin/pins/d?version=v1&before=v2", 400)
	do("PUT", "/admin/pins/bad%20db?version=v1", 400)
	do("POST", "/admin/pins", 405)

	// What cannot take effect is refused with the reason, and pins
	// nothing (issue 33 item 3: each answered 204).
	for _, tc := range []struct {
		method, path string
		status       int
		reason       string
	}{
		{"PUT", "/admin/pins/nosuch?version=v1", 404, "unknown db: nosuch"},
		{"PUT", "/admin/pins/d?version=v7", 409, "the pinned version is not in the source: v7 (d has 3 versions, v1 to v3)"},
		{"PUT", "/admin/pins/d?before=v1", 409, "no version older than v1"},
		{"DELETE", "/admin/pins/d", 404, "nothing to unpin"},
		{"DELETE", "/admin/pins/nosuch", 404, "nothing to unpin"},
	} {
		if got := do(tc.method, tc.path, tc.status); !strings.Contains(got, tc.reason) || strings.Contains(got, "node: ") {
			t.Errorf("%s %s: %q, want %q", tc.method, tc.path, got, tc.reason)
		}
	}
	if got := do("GET", "/admin/pins", 200); got != "{}\n" {
		t.Errorf("pins after refusals: %s", got)
	}
	// A pin of the cluster's wins: the node's own is refused.
	if err := n.SetPins(map[string]node.Pin{"d": {Version: "v2"}}); err != nil {
		t.Fatal(err)
	}
	if got := do("PUT", "/admin/pins/d?version=v1", 409); !strings.Contains(got, "the cluster's pin wins") {
		t.Errorf("a pin under the cluster's: %q", got)
	}
}

// servesVersion is a WaitFor condition: n answers db from version.
func servesVersion(n *node.Node, db, version string) func() error {
	return func() error {
		res, err := n.Get(context.Background(), db, []byte("key-1"), node.GetOptions{})
		if err != nil || res.Version != version {
			return fmt.Errorf("version %q, %v; want %s", res.Version, err, version)
		}
		return nil
	}
}

// TestAdminToken: the admin API's guard. With a token only the right
// bearer passes; without one, only a loopback listener's requests do.
func TestAdminToken(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	tests := []struct {
		name     string
		token    string
		loopback bool
		auth     string
		want     int
	}{
		{"token, none sent", "s3cret", false, "", http.StatusUnauthorized},
		{"token, wrong", "s3cret", true, "Bearer nope", http.StatusUnauthorized},
		{"token, not bearer", "s3cret", true, "Basic s3cret", http.StatusUnauthorized},
		{"token, right", "s3cret", false, "Bearer s3cret", http.StatusNoContent},
		{"no token, loopback", "", true, "", http.StatusNoContent},
		{"no token, open listener", "", false, "Bearer anything", http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := httptest.NewServer(edge.RequireToken(ok, tt.token, tt.loopback))
			defer ts.Close()
			req, _ := http.NewRequest(http.MethodPut, ts.URL+"/admin/pins/d?version=v1", nil)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.want)
			}
		})
	}
}
