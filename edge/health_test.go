package edge_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/spangledb/spangle/node"
)

func TestHealthz(t *testing.T) {
	tests := []struct {
		name   string
		states map[string]string // db → this node's state of version "1"
		status int
	}{
		{"active", map[string]string{"a": node.StateActive}, 200},
		{"building", map[string]string{"a": node.StateBuilding}, 200},
		{"partially healthy", map[string]string{"a": node.StateActive, "b": node.StateError}, 200},
		{"only error", map[string]string{"a": node.StateError}, 404},
		{"only removing", map[string]string{"a": node.StateRemoving}, 404},
		{"no dbs", nil, 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newFake()
			b.status = statusOf(tt.states)
			resp := startServer(t, b).do(t, "GET", "/healthz")
			if resp.status != tt.status {
				t.Errorf("status %d, want %d", resp.status, tt.status)
			}
			if ct := resp.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			var got map[string]map[string]node.NodeVersionStatus
			if err := json.Unmarshal([]byte(resp.body), &got); err != nil {
				t.Fatalf("body %q: %v", resp.body, err)
			}
			if len(got) != len(tt.states) {
				t.Errorf("%d dbs in %s, want %d", len(got), resp.body, len(tt.states))
			}
			for db, state := range tt.states {
				versions := got[db]
				if len(versions) != 1 {
					t.Errorf("db %s: versions %v, want only this node's version 1", db, versions)
				}
				if v := versions["1"]; v.State != state || v.Name != "localhost" || len(v.Partitions) != 4 {
					t.Errorf("db %s: %+v", db, v)
				}
			}
		})
	}
}

func TestHealthzNodeName(t *testing.T) {
	b := newFake()
	b.status = statusOf(map[string]string{"a": node.StateError})
	// As "peer:9599", this node holds the ACTIVE version 0 only.
	resp := startServer(t, b, withNodeName("peer:9599")).do(t, "GET", "/healthz")
	if resp.status != http.StatusOK {
		t.Errorf("status %d, want 200: %s", resp.status, resp.body)
	}
	if want := `{"a":{"0":{"name":"peer:9599","created_at":"0001-01-01T00:00:00Z","current":false,"state":"ACTIVE","partitions":[3],"shard_id":""}}}`; resp.body != want {
		t.Errorf("body\n%s\nwant\n%s", resp.body, want)
	}
}

func TestLivezReadyz(t *testing.T) {
	b := newFake()
	ts := startServer(t, b)
	check := func(path string, status int, body string) {
		t.Helper()
		resp := ts.do(t, "GET", path)
		if resp.status != status || resp.body != body {
			t.Errorf("%s: %d %q, want %d %q", path, resp.status, resp.body, status, body)
		}
	}
	check("/livez", 200, "ok\n")
	check("/readyz", 200, "ok\n")
	b.ready.Store(false)
	check("/readyz", 503, "not ready\n")
	check("/livez", 200, "ok\n")
	b.ready.Store(true)
	check("/readyz", 200, "ok\n")
	if n := b.numCalls(); n != 0 {
		t.Errorf("health endpoints called Get %d times", n)
	}
}
