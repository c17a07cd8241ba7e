package edge_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/node"
)

var activeAt = time.Date(2026, 3, 1, 12, 31, 0, 0, time.UTC)

// statusOf returns a status with one db per state given, version "1" held
// by node "localhost", plus a version "0" held only by another node.
func statusOf(states map[string]string) node.Status {
	st := node.Status{DBs: map[string]node.DBStatus{}, ShardID: "s1"}
	for db, state := range states {
		nvs := node.NodeVersionStatus{
			Name: "localhost", CreatedAt: testModified, Current: state == node.StateActive,
			State: state, Partitions: []int{0, 1, 2, 4}, ShardID: "s1",
		}
		if state == node.StateActive {
			nvs.ActiveAt = &activeAt
		}
		if state == node.StateError {
			nvs.Error = "blocks: bad file"
		}
		st.DBs[db] = node.DBStatus{Versions: map[string]node.VersionStatus{
			"1": {
				Path: "file:///src/" + db + "/1", NumPartitions: 5, TargetReplication: 2,
				ReplicationHistogram: map[int]int{1: 4}, AverageReplication: 0.8,
				MissingPartitions: 1, UnderreplicatedPartitions: 5,
				Nodes: map[string]node.NodeVersionStatus{"localhost": nvs},
			},
			"0": {
				NumPartitions: 5,
				Nodes: map[string]node.NodeVersionStatus{"peer:9599": {
					Name: "peer:9599", State: node.StateActive, Partitions: []int{3},
				}},
			},
		}}
	}
	return st
}

func TestStatusJSON(t *testing.T) {
	b := newFake()
	b.status = statusOf(map[string]string{"baby-names": node.StateActive, "names": node.StateBuilding})
	vs := b.status.DBs["names"].Versions["1"]
	vs.Build = &node.BuildProgress{FilesDone: 1, FilesTotal: 4, BytesRead: 3 << 20, BytesTotal: 12 << 20, Records: 1234, Percent: 25, Retries: 3}
	b.status.DBs["names"].Versions["1"] = vs
	ts := startServer(t, b)

	tests := []struct {
		name, path, accept string
		json               bool
	}{
		{"exact", "/", "application/json", true},
		{"list", "/", "application/json, */*", true},
		{"list with q", "/", "text/html;q=0.9, application/json;q=0.5", true},
		{"parameters", "/", "application/json; charset=utf-8", true},
		{"case", "/", "Application/JSON", true},
		{"q zero", "/", "application/json;q=0, text/html", false},
		{"html", "/", "text/html", false},
		{"star", "/", "*/*", false},
		{"browser", "/", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", false},
		{"none", "/", "", false},
		{"db", "/names", "application/json", true},
		{"db slash", "/names/", "application/json", true},
		{"db html", "/names/", "text/html", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hdrs []string
			if tt.accept != "" {
				hdrs = []string{"Accept", tt.accept}
			}
			resp := ts.do(t, "GET", tt.path, hdrs...)
			if resp.status != http.StatusOK {
				t.Fatalf("status %d", resp.status)
			}
			ct := resp.header.Get("Content-Type")
			if !tt.json {
				if ct != "text/html; charset=utf-8" || !strings.HasPrefix(resp.body, "<!DOCTYPE html>") {
					t.Fatalf("want HTML, got %q: %.80q", ct, resp.body)
				}
				return
			}
			if ct != "application/json" {
				t.Fatalf("Content-Type %q, want application/json", ct)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(resp.body), &got); err != nil {
				t.Fatalf("body is not JSON: %v", err)
			}
			versions := got
			if tt.path == "/" {
				if got["shard_id"] != "s1" {
					t.Errorf("shard_id %v", got["shard_id"])
				}
				versions = got["dbs"].(map[string]any)["names"].(map[string]any)
			}
			v1 := versions["versions"].(map[string]any)["1"].(map[string]any)
			for _, field := range []string{"path", "num_partitions", "target_replication", "replication_histogram",
				"average_replication", "missing_partitions", "underreplicated_partitions",
				"overreplicated_partitions", "nodes", "build"} {
				if _, ok := v1[field]; !ok {
					t.Errorf("version status lacks %q: %v", field, v1)
				}
			}
			if h := v1["replication_histogram"].(map[string]any); h["1"] != 4.0 {
				t.Errorf("replication_histogram %v", h)
			}
			n := v1["nodes"].(map[string]any)["localhost"].(map[string]any)
			for _, field := range []string{"name", "created_at", "current", "state", "partitions", "shard_id"} {
				if _, ok := n[field]; !ok {
					t.Errorf("node status lacks %q: %v", field, n)
				}
			}
			if n["state"] != "BUILDING" {
				t.Errorf("state %v", n["state"])
			}
		})
	}
}

func TestStatusUnknownDB(t *testing.T) {
	b := newFake()
	b.status = statusOf(map[string]string{"names": node.StateActive})
	ts := startServer(t, b)
	tests := []struct {
		path   string
		status int
	}{
		{"/nope", 404},
		{"/nope/", 404},
		{"/nope/?proxy=status/", 501},
		{"/names/?proxy=status/", 200},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			for _, accept := range []string{"application/json", "text/html"} {
				if resp := ts.do(t, "GET", tt.path, "Accept", accept); resp.status != tt.status {
					t.Errorf("Accept %s: status %d, want %d", accept, resp.status, tt.status)
				}
			}
		})
	}
	if n := b.numCalls(); n != 0 {
		t.Errorf("status pages called Get %d times", n)
	}
}

func TestDashboard(t *testing.T) {
	b := newFake()
	b.status = statusOf(map[string]string{"names": node.StateActive, "broken": node.StateError,
		"upcoming": node.StateAvailable, "leaving": node.StateRemoving})
	ts := startServer(t, b)
	resp := ts.do(t, "GET", "/")
	for _, want := range []string{
		`<meta http-equiv="refresh"`, "names", "broken", "upcoming", "leaving",
		"ACTIVE", "ERROR", "AVAILABLE", "REMOVING", "blocks: bad file",
		"holds 0\u20112, 4", // a non-breaking hyphen "missing 1", "under 5", "average 0.80", "4 with 1 replica(s)",
	} {
		if !strings.Contains(resp.body, want) {
			t.Errorf("dashboard lacks %q", want)
		}
	}
	one := ts.do(t, "GET", "/names/")
	if !strings.Contains(one.body, "names") || strings.Contains(one.body, "broken") {
		t.Errorf("db page shows other dbs or not its own")
	}
	empty := startServer(t, &fakeBackend{}).do(t, "GET", "/")
	if empty.status != 200 || !strings.Contains(empty.body, "No databases.") {
		t.Errorf("empty dashboard: %d %q", empty.status, empty.body)
	}
}

func TestDashboardBuildProgress(t *testing.T) {
	b := newFake()
	b.status = statusOf(map[string]string{"names": node.StateBuilding})
	vs := b.status.DBs["names"].Versions["1"]
	vs.Build = &node.BuildProgress{FilesDone: 1, FilesTotal: 4, BytesRead: 3 << 20, BytesTotal: 12 << 20, Records: 1234, Percent: 25, Retries: 3}
	b.status.DBs["names"].Versions["1"] = vs
	resp := startServer(t, b).do(t, "GET", "/names/")
	for _, want := range []string{`<progress max="100" value="25">`, "25.0%", "files 1/4", "1234 records", "3.0 MiB of 12.0 MiB", "3 download retries"} {
		if !strings.Contains(resp.body, want) {
			t.Errorf("dashboard lacks %q", want)
		}
	}
}

func TestDashboardEscapes(t *testing.T) {
	const evil = `<script>alert("x")</script>`
	const evilDB = `"><img src=x onerror=alert(1)>` // no "/": reachable as /<db>/
	b := newFake()
	b.status = node.Status{ShardID: evil, DBs: map[string]node.DBStatus{
		evilDB: {Versions: map[string]node.VersionStatus{
			evil: {Path: evil, Partitioner: evil, Nodes: map[string]node.NodeVersionStatus{
				evil: {Name: evil, State: `ACTIVE" onmouseover="alert(1)`, ShardID: evil, Error: evil},
			}},
		}},
	}}
	ts := startServer(t, b, func(c *edge.Config) { c.NodeName = evil })
	for _, path := range []string{"/", "/" + url.PathEscape(evilDB) + "/"} {
		resp := ts.do(t, "GET", path)
		if resp.status != 200 {
			t.Fatalf("%s: status %d", path, resp.status)
		}
		if strings.Contains(resp.body, "<script") || strings.Contains(resp.body, "<img") ||
			strings.Contains(resp.body, `" onmouseover`) {
			t.Errorf("%s: unescaped input in dashboard:\n%s", path, resp.body)
		}
		if !strings.Contains(resp.body, "&lt;script&gt;") || !strings.Contains(resp.body, "&lt;img") {
			t.Errorf("%s: escaped name missing", path)
		}
	}
}

// TestDashboardReadable: a build's duration is shown at a precision a
// reader wants ("took 37ms", not "took 0.036788604s"), timestamps do not
// wrap mid-token, and the header names the node's release (issue 29).
func TestDashboardReadable(t *testing.T) {
	b := newFake()
	b.status = statusOf(map[string]string{"names": node.StateActive})
	b.status.Release = "v1.2.3 (rev 0123abcd)"
	vs := b.status.DBs["names"].Versions["1"]
	vs.Build = &node.BuildProgress{FilesDone: 4, FilesTotal: 4, Percent: 100, DurationSec: 0.036788604}
	b.status.DBs["names"].Versions["1"] = vs
	resp := startServer(t, b).do(t, "GET", "/names/")
	for _, want := range []string{"took 37ms", `<span class="ts">`, "white-space: nowrap", "v1.2.3 (rev 0123abcd)"} {
		if !strings.Contains(resp.body, want) {
			t.Errorf("dashboard lacks %q", want)
		}
	}
	if strings.Contains(resp.body, "0.036788604") {
		t.Errorf("dashboard shows a duration at full precision")
	}
}

// TestDashboardRefused: a version refused by its db's guards shows its
// reasons and the command that activates it anyway; a forced one says
// it was forced.
func TestDashboardRefused(t *testing.T) {
	b := newFake()
	b.status = statusOf(map[string]string{"names": node.StateRefused, "forced": node.StateActive})
	for db, forced := range map[string]bool{"names": false, "forced": true} {
		vs := b.status.DBs[db].Versions["1"]
		for name, nv := range vs.Nodes {
			nv.Refused, nv.Forced = "canary_keys: canary key \"k\" is missing", forced
			vs.Nodes[name] = nv
		}
	}
	ts := startServer(t, b)
	for path, want := range map[string]string{
		"/names/":  "Refused by its guards (<code>spangle activate --force names 1</code> activates it): canary_keys: canary key &#34;k&#34; is missing",
		"/forced/": "Forced active past its guards: canary_keys",
	} {
		if resp := ts.do(t, "GET", path); !strings.Contains(resp.body, want) || !strings.Contains(resp.body, "state-") {
			t.Errorf("%s lacks %q:\n%s", path, want, resp.body)
		}
	}
}
