package edge_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/nodetest"
)

var _ edge.Backend = (*node.Node)(nil)

// healthyDir is sequins' "healthy" fixture: db baby-names, version 1.
const healthyDir = "../testdata/sequins/test_databases/healthy"

// TestBehaviour runs one suite against the fake backend and a real node
// serving the same data, so that the fake stays honest.
func TestBehaviour(t *testing.T) {
	backends := []struct {
		name string
		new  func(t *testing.T) edge.Backend
	}{
		{"fake", func(*testing.T) edge.Backend {
			b := newFake()
			b.dbs = map[string]fakeDB{"baby-names": {
				result: node.Result{Version: "1", Modified: testModified},
				values: map[string]string{"1881/boy": "John", "1881/girl": "Mary"},
			}}
			b.status = statusOf(map[string]string{"baby-names": node.StateActive})
			return b
		}},
		{"node", newNode},
	}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			ts := startServer(t, be.new(t))
			for _, tt := range []struct {
				path, version string
				status        int
				body          string
			}{
				{"/baby-names/1881/boy", "1", 200, "John"},
				{"/baby-names/1881%2Fgirl", "1", 200, "Mary"},
				{"/baby-names/1881/boy?proxy=1", "1", 200, "John"},
				{"/baby-names/1881/nobody", "1", 404, ""},
				{"/baby-names/1881/boy?proxy=2", "", 501, "unknown version: this node does not hold the version named\n"},
				{"/nope/1881/boy", "", 404, "unknown db: this node serves no db of that name\n"},
				{"/nope/1881/boy?proxy=1", "", 501, "unknown db: this node serves no db of that name\n"},
			} {
				resp := ts.do(t, "GET", tt.path)
				if resp.status != tt.status || resp.body != tt.body || resp.header.Get("X-Spangle-Version") != tt.version {
					t.Errorf("%s: %d %q version %q, want %d %q version %q", tt.path, resp.status, resp.body,
						resp.header.Get("X-Spangle-Version"), tt.status, tt.body, tt.version)
				}
				if tt.status == 200 && resp.header.Get("Content-Type") != "application/octet-stream" {
					t.Errorf("%s: Content-Type %q", tt.path, resp.header.Get("Content-Type"))
				}
			}
			var st node.Status
			if err := json.Unmarshal([]byte(ts.do(t, "GET", "/", "Accept", "application/json").body), &st); err != nil {
				t.Fatal(err)
			}
			if got := st.DBs["baby-names"].Versions["1"].Nodes["localhost"].State; got != node.StateActive {
				t.Errorf("status: baby-names/1 on localhost is %q, want ACTIVE", got)
			}
			for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/baby-names/": 200, "/nope/": 404} {
				if got := ts.do(t, "GET", path).status; got != want {
					t.Errorf("%s: %d, want %d", path, got, want)
				}
			}
		})
	}
}

// newNode starts a real node on the healthy fixture and waits until it
// has loaded it.
func newNode(t *testing.T) edge.Backend {
	t.Helper()
	src, err := filepath.Abs(healthyDir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := node.DefaultConfig()
	cfg.Source, cfg.DataDir = src, t.TempDir()
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nodetest.Start(t, n)
	return n
}
