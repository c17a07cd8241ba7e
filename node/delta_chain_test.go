package node

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/blocks"
	"github.com/spangledb/spangle/node/nodetest"
)

// TestDeltaChainStepDigest: each base a node builds on its way along a
// chain is checked against its own _DIGEST, not only the last version.
// d: the node holds v1; v3 over v2 over v1 arrives, v2's _DIGEST wrong
// and v3's right (v3's records are right whatever v2's digest says). v3
// fails naming v2 and its step (and v2, tried next, its own check), v1
// keeps serving, neither leaves files;
// once v2's _DIGEST is put right, v3 builds. e: a new node builds the
// chain's full version first, and its wrong _DIGEST fails e's delta at
// step 1. Without the check of each step, v3 went active on a base whose
// digest did not match (and e's v2 on a wrong v1).
func TestDeltaChainStepDigest(t *testing.T) {
	root := t.TempDir()
	src := newDeltaSource(t, root, "d", 3)
	src.full("v1", 120)
	reg := prometheus.NewRegistry()
	n := newTestNode(t, root, func(c *Config) { c.Registerer = reg })
	waitFor(t, "v1", func() bool { return n.activeVersion("d") == "v1" })

	src.delta("v2", "v1", map[string]string{"key-1": "v2:1"}, []string{"key-2"}, false)
	src.delta("v3", "v2", map[string]string{"key-3": "v3:3"}, []string{"key-4"}, true)
	n.Refresh()
	waitFor(t, "v3 to fail or go active", func() bool { return n.state("d", "v3") == StateError || n.activeVersion("d") == "v3" })
	if n.activeVersion("d") == "v3" {
		t.Fatal("v3 went active over a v2 whose _DIGEST does not match")
	}
	e := n.Status().DBs["d"].Versions["v3"].Nodes[n.Name()].Error
	for _, want := range []string{"base v2 (step 1 of 2 of the chain v1 (held) → v2 → v3)", "d/v2: digest mismatch: partition"} {
		if !strings.Contains(e, want) {
			t.Errorf("v3's error %q lacks %q", e, want)
		}
	}
	// The node then tries v2 on its own, which fails its own check.
	waitFor(t, "v2 to fail", func() bool { return n.state("d", "v2") == StateError })
	if n.activeVersion("d") != "v1" {
		t.Fatalf("active %q after v3 failed, want v1", n.activeVersion("d"))
	}
	src.check(n, "v1")
	for _, v := range []string{"v2", "v3"} {
		if _, err := os.Stat(filepath.Join(n.data, "dbs", "d", v)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left files: %v; %+v", v, err, n.Status().DBs["d"].Versions[v])
		}
	}
	if got := nodetest.Metric(t, reg, "spangle_digest_checks_total", "db", "d", "result", "mismatch"); got < 1 {
		t.Errorf("mismatches counted: %v", got)
	}

	// v2's _DIGEST put right: nothing was lost, v3 builds at the next try.
	src.write("v2", blocks.DigestFileName, src.digest(src.sets["v2"]))
	n.Refresh()
	waitFor(t, "v3", func() bool { return n.activeVersion("d") == "v3" })
	src.check(n, "v3", "key-2", "key-4")

	// e: the chain's full version, built by a new node as the first step,
	// is checked too.
	se := newDeltaSource(t, root, "e", 2)
	se.full("v1", 50)
	se.write("v1", blocks.DigestFileName, se.digest(map[string]string{"key-0": "other"}))
	se.delta("v2", "v1", map[string]string{"key-1": "v2:1"}, nil, true)
	fresh := newTestNode(t, root, nil)
	waitFor(t, "e's v2 to fail or go active", func() bool { return fresh.state("e", "v2") == StateError || fresh.activeVersion("e") == "v2" })
	if e := fresh.Status().DBs["e"].Versions["v2"].Nodes[fresh.Name()].Error; !strings.Contains(e, "base v1 (step 1 of 2 of the chain v1 → v2)") ||
		!strings.Contains(e, "e/v1: digest mismatch") {
		t.Errorf("e's v2: %q", e)
	}
}

// TestDeltaBaseNotKept: a node outside a cluster keeps only its active
// version, so a delta over an older one (v3 over v1, the node on v2)
// rebuilds that base from the source (the chain's full version), applies
// the delta, and leaves nothing of v1 behind; with v1 gone from the
// source too, the delta fails naming it and v2 keeps serving.
func TestDeltaBaseNotKept(t *testing.T) {
	root := t.TempDir()
	src := newDeltaSource(t, root, "d", 3)
	src.full("v1", 80)
	n := newTestNode(t, root, nil)
	waitFor(t, "v1", func() bool { return n.activeVersion("d") == "v1" })
	src.delta("v2", "v1", map[string]string{"key-1": "v2:1"}, nil, true)
	n.Refresh()
	waitFor(t, "v2", func() bool { return n.activeVersion("d") == "v2" })
	n.waitRetired(t, "d", "v1")
	if _, err := os.Stat(filepath.Join(n.data, "dbs", "d", "v1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("v1 kept after the switch outside a cluster: %v", err)
	}

	// v3 over v1: v1 is built again from the source.
	src.delta("v3", "v1", map[string]string{"key-3": "v3:3"}, []string{"key-4"}, true)
	n.Refresh()
	waitFor(t, "v3", func() bool { return n.activeVersion("d") == "v3" })
	src.check(n, "v3", "key-4")
	if got := n.Status().DBs["d"].Versions["v3"].Nodes[n.Name()]; got.State != StateActive {
		t.Fatalf("v3: %+v", got)
	}
	if _, err := os.Stat(filepath.Join(n.data, "dbs", "d", "v1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("v1, built again as v3's base, left behind: %v", err)
	}

	// v5 over v4 over v1, v1 gone from the source: no base anywhere.
	src.delta("v4", "v1", map[string]string{"key-5": "v4:5"}, nil, true)
	src.delta("v5", "v4", map[string]string{"key-6": "v5:6"}, nil, true)
	if err := os.RemoveAll(filepath.Join(root, "d", "v1")); err != nil {
		t.Fatal(err)
	}
	n.Refresh()
	waitFor(t, "v5 to fail or go active", func() bool { return n.state("d", "v5") == StateError || n.activeVersion("d") == "v5" })
	if e := n.Status().DBs["d"].Versions["v5"].Nodes[n.Name()].Error; !strings.Contains(e, "d/v4: its base v1 is not in the source, nor held here") {
		t.Errorf("v5's error: %q", e)
	}
	src.check(n, "v3", "key-4")
}

// TestDeltaPlanString: a chain's text in an error stays short however
// long the chain.
func TestDeltaPlanString(t *testing.T) {
	for _, c := range []struct {
		plan *deltaPlan
		want string
	}{
		{&deltaPlan{steps: []string{"v1", "v2"}}, "v1 → v2"},
		{&deltaPlan{from: &version{name: "v1"}, steps: []string{"v2", "v3"}}, "v1 (held) → v2 → v3"},
		{&deltaPlan{steps: []string{"a", "b", "c", "d", "e", "f", "g", "h"}}, "a → b → c → (2 more) → f → g → h"},
	} {
		if got := c.plan.String(); got != c.want {
			t.Errorf("%v: %q, want %q", c.plan.steps, got, c.want)
		}
	}
}
