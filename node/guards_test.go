package node

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/spangledb/spangle/node/nodetest"
)

// records returns key-<i> → value-<i> for i in [from, to), with the
// values of the keys in changed set to "changed".
func records(from, to int, changed ...int) []nodetest.Record {
	var rs []nodetest.Record
	for i := from; i < to; i++ {
		v := fmt.Sprintf("value-%d", i)
		if slices.Contains(changed, i) {
			v = "changed"
		}
		rs = append(rs, nodetest.Record{Key: fmt.Appendf(nil, "key-%d", i), Value: []byte(v)})
	}
	return rs
}

// refusedFor waits for version of db to be REFUSED and returns why.
func (n *testNode) refusedFor(t *testing.T, db, version string) string {
	t.Helper()
	waitFor(t, db+"/"+version+" refused", func() bool { return n.state(db, version) == StateRefused })
	return n.Status().DBs[db].Versions[version].Nodes[n.Name()].Refused
}

// TestGuardMinRecords: a version with fewer records than min_records is
// refused: held, not active, the reason in its status and the refusal
// counted; the active version keeps serving. A pin to it without force is
// not followed (the pin error says why); a forced pin activates it. A
// newer version that passes replaces a refused one.
func TestGuardMinRecords(t *testing.T) {
	root := t.TempDir()
	nodetest.WriteVersion(t, root, "d", "v1", 2, records(0, 100))
	n := newTestNode(t, root, func(c *Config) { c.DBs = map[string]DBConfig{"d": {MinRecords: 50}} })
	waitFor(t, "v1 active", func() bool { return n.activeVersion("d") == "v1" })

	nodetest.WriteVersion(t, root, "d", "v2", 2, records(0, 10))
	n.Refresh()
	why := n.refusedFor(t, "d", "v2")
	if !strings.Contains(why, "min_records: 10 records, fewer than min_records 50") {
		t.Errorf("refused because %q", why)
	}
	if v := n.activeVersion("d"); v != "v1" {
		t.Fatalf("active %q, want v1", v)
	}
	if got := testutil.ToFloat64(n.metrics.refusals.WithLabelValues("d", "min_records")); got != 1 {
		t.Errorf("spangle_version_refusals_total{check=min_records} %v, want 1", got)
	}
	if r, err := n.get(t, "d", "key-50"); err != nil || !r.Found {
		t.Errorf("key-50 of v1: %+v, %v", r, err)
	}
	// The refused version stays readable by name.
	if r, err := n.Get(t.Context(), "d", []byte("key-1"), GetOptions{Version: "v2"}); err != nil || !r.Found {
		t.Errorf("key-1 of the refused v2, by name: %+v, %v", r, err)
	}

	if err := n.Pin("d", Pin{Version: "v2"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pin error", func() bool { return strings.Contains(n.Status().DBs["d"].PinError, "refused") })
	if v := n.activeVersion("d"); v != "v1" {
		t.Fatalf("a pin without force activated %s", v)
	}
	if err := n.Pin("d", Pin{Version: "v2", Force: true}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "v2 forced active", func() bool { return n.activeVersion("d") == "v2" })
	nv := n.Status().DBs["d"].Versions["v2"].Nodes[n.Name()]
	if !nv.Forced || nv.Refused == "" || nv.State != StateActive {
		t.Errorf("status of the forced v2: %+v", nv)
	}
	if err := n.Pin("d", Pin{}); err != nil {
		t.Fatal(err)
	}

	// Refused again, then replaced by a version that passes.
	nodetest.WriteVersion(t, root, "d", "v3", 2, records(0, 20))
	n.Refresh()
	n.refusedFor(t, "d", "v3")
	nodetest.WriteVersion(t, root, "d", "v4", 2, records(0, 60))
	n.Refresh()
	waitFor(t, "v4 active", func() bool { return n.activeVersion("d") == "v4" })
	n.waitRetired(t, "d", "v3")
}

// TestGuardMaxChange: max_change counts the keys added, removed and
// changed against the active version, over its keys: 5 of 100 passes
// 0.05, 6 do not (2 changed, 2 added, 2 removed).
func TestGuardMaxChange(t *testing.T) {
	root := t.TempDir()
	nodetest.WriteVersion(t, root, "d", "v1", 3, records(0, 100))
	n := newTestNode(t, root, func(c *Config) { c.DBs = map[string]DBConfig{"d": {MaxChange: 0.05}} })
	waitFor(t, "v1 active", func() bool { return n.activeVersion("d") == "v1" })

	// 3 changed, 1 added, 1 removed: 5 %.
	nodetest.WriteVersion(t, root, "d", "v2", 3, records(1, 101, 10, 20, 30))
	n.Refresh()
	waitFor(t, "v2 active", func() bool { return n.activeVersion("d") == "v2" })

	// 2 changed, 2 added, 2 removed: 6 %.
	nodetest.WriteVersion(t, root, "d", "v3", 3, records(3, 103, 10, 20, 30, 50, 60))
	n.Refresh()
	why := n.refusedFor(t, "d", "v3")
	if !strings.Contains(why, "0.06 of the keys changed against version v2 (2 added, 2 removed, 2 changed of 100)") {
		t.Errorf("refused because %q", why)
	}
	if v := n.activeVersion("d"); v != "v2" {
		t.Errorf("active %q, want v2", v)
	}
}

// TestGuardCanaries: a version lacking a canary key, or holding a
// canary value that differs, is refused; one with both passes.
func TestGuardCanaries(t *testing.T) {
	root := t.TempDir()
	nodetest.WriteVersion(t, root, "d", "v1", 2, records(0, 10))
	n := newTestNode(t, root, func(c *Config) {
		c.DBs = map[string]DBConfig{"d": {CanaryKeys: []string{"key-1"}, CanaryValues: map[string]string{"key-2": "value-2"}}}
	})
	waitFor(t, "v1 active", func() bool { return n.activeVersion("d") == "v1" })

	nodetest.WriteVersion(t, root, "d", "v2", 2, records(2, 10))
	n.Refresh()
	if why := n.refusedFor(t, "d", "v2"); why != `canary_keys: canary key "key-1" is missing` {
		t.Errorf("v2 refused because %q", why)
	}
	nodetest.WriteVersion(t, root, "d", "v3", 2, records(0, 10, 2))
	n.Refresh()
	if why := n.refusedFor(t, "d", "v3"); why != `canary_keys: canary key "key-2" has another value` {
		t.Errorf("v3 refused because %q", why)
	}
	nodetest.WriteVersion(t, root, "d", "v4", 2, records(0, 10, 3))
	n.Refresh()
	waitFor(t, "v4 active", func() bool { return n.activeVersion("d") == "v4" })
}

// TestChangedKeys: with ChangedKeys set, a switch keeps the keys it
// added, removed and changed, for the purge hooks, whatever the
// partitioning of the two versions; none when more changed than kept.
func TestChangedKeys(t *testing.T) {
	root := t.TempDir()
	nodetest.WriteVersion(t, root, "d", "v1", 2, records(0, 100))
	n := newTestNode(t, root, func(c *Config) { c.ChangedKeys = 5 })
	waitFor(t, "v1 active", func() bool { return n.activeVersion("d") == "v1" })
	if _, ok := n.ChangedKeys("d", "v1"); ok {
		t.Errorf("changed keys of the first version")
	}
	for _, c := range []struct {
		version string
		files   int
		recs    []nodetest.Record
		want    []string // nil: none kept
	}{
		{"v2", 2, records(1, 101, 10, 20), []string{"key-0", "key-10", "key-100", "key-20"}},
		{"v3", 3, records(1, 101, 10, 30), []string{"key-20", "key-30"}}, // partitioned in 3
		{"v4", 3, records(1, 101, 1, 2, 3, 4, 5, 6), nil},
	} {
		nodetest.WriteVersion(t, root, "d", c.version, c.files, c.recs)
		n.Refresh()
		waitFor(t, c.version+" active", func() bool { return n.activeVersion("d") == c.version })
		ch, ok := n.ChangedKeys("d", c.version)
		var got []string
		for _, k := range ch.Keys {
			got = append(got, string(k))
		}
		slices.Sort(got)
		if ok != (c.want != nil) || !slices.Equal(got, c.want) {
			t.Errorf("%s: changed keys %q (%v), want %q", c.version, got, ok, c.want)
		}
	}
}

// TestGuardRefusedRestart: a node restarted while holding a refused
// version serves the version it served and holds the refused one,
// still refused (the newest on disk is not taken); once forced, the
// refused version is what a restart serves; a refused version that
// passes the guards a restart brings (relaxed) goes active.
func TestGuardRefusedRestart(t *testing.T) {
	root := t.TempDir()
	nodetest.WriteVersion(t, root, "d", "v1", 2, records(0, 100))
	n := newTestNode(t, root, func(c *Config) { c.DBs = map[string]DBConfig{"d": {MinRecords: 50}} })
	waitFor(t, "v1 active", func() bool { return n.activeVersion("d") == "v1" })
	nodetest.WriteVersion(t, root, "d", "v2", 2, records(0, 10))
	n.Refresh()
	n.refusedFor(t, "d", "v2")

	cfg := n.cfg
	if err := n.Shutdown(ctxTimeout(t)); err != nil {
		t.Fatal(err)
	}
	n = startTestNode(t, cfg)
	if v := n.activeVersion("d"); v != "v1" {
		t.Fatalf("after a restart the node serves %q, want v1", v)
	}
	if why := n.refusedFor(t, "d", "v2"); !strings.Contains(why, "min_records") {
		t.Errorf("v2 after the restart: refused because %q", why)
	}

	if err := n.Pin("d", Pin{Version: "v2", Force: true}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "v2 forced active", func() bool { return n.activeVersion("d") == "v2" })
	if err := n.Pin("d", Pin{}); err != nil {
		t.Fatal(err)
	}
	if err := n.Shutdown(ctxTimeout(t)); err != nil {
		t.Fatal(err)
	}
	n = startTestNode(t, cfg)
	if v := n.activeVersion("d"); v != "v2" {
		t.Fatalf("after a restart the node serves %q, want the forced v2", v)
	}

	// Refused again; the guard relaxed and the node restarted: it passes.
	nodetest.WriteVersion(t, root, "d", "v3", 2, records(0, 30))
	n.Refresh()
	n.refusedFor(t, "d", "v3")
	if err := n.Shutdown(ctxTimeout(t)); err != nil {
		t.Fatal(err)
	}
	cfg.DBs = map[string]DBConfig{"d": {MinRecords: 20}}
	n = startTestNode(t, cfg)
	waitFor(t, "v3 active once its guard is relaxed", func() bool { return n.activeVersion("d") == "v3" })
}

// TestGuardMaxChangeDelta: a delta version over the active one is
// checked against max_change from the counts its build made (added,
// changed, deleted), without a diff of the two versions; a delta that
// changed more keys than ChangedKeys keeps none, also without a diff.
func TestGuardMaxChangeDelta(t *testing.T) {
	root := t.TempDir()
	s := newDeltaSource(t, root, "d", 2)
	s.full("v1", 100)
	n := newTestNode(t, root, func(c *Config) {
		c.DBs = map[string]DBConfig{"d": {MaxChange: 0.05}}
		c.ChangedKeys = 3
	})
	waitFor(t, "v1 active", func() bool { return n.activeVersion("d") == "v1" })
	d := (*n.dbs.Load())["d"]

	// 3 changed, 1 new, 1 deleted: 5 %, more than 3 kept keys.
	s.delta("v2", "v1", map[string]string{"key-1": "x", "key-2": "x", "key-3": "x", "new-1": "x"}, []string{"key-9"}, true)
	n.Refresh()
	waitFor(t, "v2 active", func() bool { return n.activeVersion("d") == "v2" })
	// 2 changed, 2 new, 2 deleted (and one upsert of the same value): 6 %.
	s.delta("v3", "v2", map[string]string{"key-4": "x", "key-5": "x", "new-2": "x", "new-3": "x", "key-6": "v1:6"}, []string{"key-7", "key-8"}, true)
	n.Refresh()
	if why := n.refusedFor(t, "d", "v3"); !strings.Contains(why, "0.06 of the keys changed against version v2 (2 added, 2 removed, 2 changed of 100)") {
		t.Errorf("v3 refused because %q", why)
	}
	if got := d.diffs.Load(); got != 0 {
		t.Errorf("%d diffs made of delta versions", got)
	}
}
