package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPartialVersionNotActive: a node never activates a version one of
// whose data entries is a directory: v2 fails with the reason in its
// status, and v1 keeps serving every key.
func TestPartialVersionNotActive(t *testing.T) {
	root := t.TempDir()
	writeVersion(t, root, "d", "v1", 4, 40)
	n := newTestNode(t, root, nil)
	waitFor(t, "v1 active", func() bool { return n.activeVersion("d") == "v1" })

	writeVersion(t, root, "d", "v2", 4, 40)
	p3 := filepath.Join(root, "d", "v2", "part-00003")
	must0(t, os.Remove(p3))
	must0(t, os.Mkdir(p3, 0o755))
	n.Refresh()
	waitFor(t, "v2 failed", func() bool {
		return n.Status().DBs["d"].Versions["v2"].Nodes[n.Name()].State == StateError
	})
	if st := n.Status().DBs["d"].Versions["v2"].Nodes[n.Name()]; !strings.Contains(st.Error, "part-00003 is a directory") {
		t.Fatalf("v2: %+v", st)
	}
	if right, _ := readAllKeys(t, n, "d", "v1", 40); right != 40 || n.activeVersion("d") != "v1" {
		t.Fatalf("v1 serves %d of 40 keys, active %q", right, n.activeVersion("d"))
	}
}

func must0(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestForcedRefreshNotLostBehindAnnounce: a SIGHUP (Refresh) right after
// an announcement, while its wake-up is still queued, still forces the
// next refresh. (Both once travelled on one buffered channel of bools, and
// the forced one was dropped.) The node is not started, so nothing drains
// the queue between the two calls.
func TestForcedRefreshNotLostBehindAnnounce(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Source, cfg.DataDir = t.TempDir(), t.TempDir()
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.Announce("d", "v3") // queues a wake-up
	n.Refresh()           // must not be lost behind it
	select {
	case <-n.refreshCh:
	default:
		t.Fatal("no wake-up queued")
	}
	if !n.forceRefresh.Swap(false) {
		t.Fatal("the forced refresh was lost behind the announcement")
	}
	n.Announce("d", "v4")
	<-n.refreshCh
	if n.forceRefresh.Load() {
		t.Fatal("an announcement alone forced a refresh")
	}
}

// TestFallbackToOlderVersion: a fresh node whose newest version fails to
// build serves the newest one that builds, and switches to the newer one
// on its retry schedule once that one builds.
func TestFallbackToOlderVersion(t *testing.T) {
	root := t.TempDir()
	writeVersion(t, root, "d", "v1", 2, 20)
	bad := filepath.Join(root, "d", "v2")
	must0(t, os.MkdirAll(bad, 0o755))
	must0(t, os.WriteFile(filepath.Join(bad, "part-00000"), []byte("not a SequenceFile"), 0o644))
	must0(t, os.WriteFile(filepath.Join(bad, "_SUCCESS"), nil, 0o644))
	n := newTestNode(t, root, func(c *Config) { c.RetryFailedAfter = 50 * time.Millisecond })
	waitFor(t, "v1 serving although v2 is newer", func() bool { return n.activeVersion("d") == "v1" })
	if right, _ := readAllKeys(t, n, "d", "v1", 20); right != 20 {
		t.Fatalf("v1 serves %d of 20 keys", right)
	}
	// v2 is retried every 50 ms and more (doubling): between two tries it
	// shows as failed, with why.
	waitFor(t, "v2 shown as failed", func() bool {
		st := n.Status().DBs["d"].Versions["v2"].Nodes[n.Name()]
		return st.State == StateError && st.Error != ""
	})

	// The good files replace the bad one in place: a retry that lists the
	// db while v2's directory is gone forgets v2 (a failed version that
	// left the source), and with no refresh period nothing lists it again.
	writeVersion(t, root, "d", "v2", 2, 20)
	waitFor(t, "v2 active on its retry schedule", func() bool { return n.activeVersion("d") == "v2" })
}
