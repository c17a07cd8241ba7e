package node

import (
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/node/nodetest"
)

// TestMemoryReleaseBesideLoop holds the memory release after a build (it
// took up to 1.1 s on a loaded machine) and publishes the next version:
// the db builds and serves it meanwhile. It failed when the release ran
// on the db's loop: the next version waited for it.
func TestMemoryReleaseBesideLoop(t *testing.T) {
	root := t.TempDir()
	writeVersion(t, root, "d", "v1", 2, 10)
	cfg := DefaultConfig()
	cfg.Source = root
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.RequireSuccessFile = true
	cfg.Logger = nodetest.Logger()
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The release after v2's build is held until the test ends, or for
	// testTimeout at most (then the test has failed).
	var calls atomic.Int32
	held, release := make(chan struct{}), make(chan struct{})
	var heldOut atomic.Bool // the held release returned by its bound
	n.mem.free = func() {
		if calls.Add(1) != 2 {
			return
		}
		close(held)
		select {
		case <-release:
		case <-time.After(testTimeout):
			heldOut.Store(true)
		}
	}
	nodetest.Start(t, n)
	t.Cleanup(func() { close(release) }) // before the node's shutdown
	tn := &testNode{Node: n, root: root, data: cfg.DataDir}
	if got := tn.activeVersion("d"); got != "v1" {
		t.Fatalf("active %q, want v1", got)
	}

	writeVersion(t, root, "d", "v2", 2, 10)
	n.Refresh()
	select {
	case <-held:
	case <-time.After(testTimeout):
		t.Fatal("no memory release after v2's build")
	}
	writeVersion(t, root, "d", "v3", 2, 10)
	n.Refresh()
	waitFor(t, "v3 active", func() bool { return tn.activeVersion("d") == "v3" })
	if heldOut.Load() {
		t.Fatal("v3 waited for the memory release after v2's build")
	}
	if r, err := tn.get(t, "d", "key-3"); err != nil || string(r.Value) != "v3:3" {
		t.Fatalf("key-3: %q %v, want v3:3", r.Value, err)
	}
}

// TestMemoryReleaseMetric: each build's memory release is observed in
// spangle_memory_release_seconds.
func TestMemoryReleaseMetric(t *testing.T) {
	root := t.TempDir()
	writeVersion(t, root, "d", "v1", 2, 10)
	reg := prometheus.NewRegistry()
	n := newTestNode(t, root, func(c *Config) { c.Registerer = reg })
	waitFor(t, "v1 active", func() bool { return n.activeVersion("d") == "v1" })
	waitFor(t, "a release observed", func() bool {
		return nodetest.Metric(t, reg, "spangle_memory_release_seconds") >= 1
	})
	writeVersion(t, root, "d", "v2", 2, 10)
	n.Refresh()
	waitFor(t, "v2 active", func() bool { return n.activeVersion("d") == "v2" })
	waitFor(t, "two releases observed", func() bool {
		return nodetest.Metric(t, reg, "spangle_memory_release_seconds") >= 2
	})
}
