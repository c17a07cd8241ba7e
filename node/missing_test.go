package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/node/nodetest"
)

// dataExists reports whether db's version is still on the node's disk.
func (n *testNode) dataExists(db, version string) bool {
	_, err := os.Stat(filepath.Join(n.data, "dbs", db, version))
	return err == nil
}

// missingSince returns when the status says db went missing from the
// source, zero if it does not.
func (n *testNode) missingSince(db string) time.Time {
	if st, ok := n.Status().DBs[db]; ok && st.MissingSince != nil {
		return *st.MissingSince
	}
	return time.Time{}
}

// checkServes fails unless db answers key-0..key-(keys-1) from version.
func (n *testNode) checkServes(t testing.TB, db, version string, keys int) {
	t.Helper()
	for i := range keys {
		key := "key-" + itoa(i)
		res, err := n.get(t, db, key)
		if err != nil || !res.Found || string(res.Value) != version+":"+itoa(i) {
			t.Fatalf("%s %s: %+v %v; want %s:%d", db, key, res, err, version, i)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestMissingDBKeepsServing: a listing that lacks a served db, or lists
// nothing, keeps it serving, marked missing in the status and metrics;
// listed again, it is no longer missing. Before, the db was removed and
// its files deleted at once (the node said "db is gone from the source;
// removing it").
func TestMissingDBKeepsServing(t *testing.T) {
	root := t.TempDir()
	writeVersion(t, root, "a", "1", 1, 5)
	writeVersion(t, root, "b", "1", 2, 5)
	reg := prometheus.NewRegistry()
	n := newTestNode(t, root, func(c *Config) { c.Registerer = reg })
	<-n.Loaded()
	aside := t.TempDir()
	// Nothing missing, no removal due: the refresh loop's timer stays
	// off (a zero time's UnixNano once armed it in the past, and the loop
	// listed the source without a pause).
	if at := n.removeAt.Load(); at != 0 {
		t.Fatalf("a removal is due at %v with no db missing", time.Unix(0, at))
	}

	// A partial listing: b is moved away.
	if err := os.Rename(filepath.Join(root, "b"), filepath.Join(aside, "b")); err != nil {
		t.Fatal(err)
	}
	n.Refresh()
	waitFor(t, "b marked missing", func() bool { return !n.missingSince("b").IsZero() })
	n.checkServes(t, "b", "1", 5)
	n.checkServes(t, "a", "1", 5)
	if !n.dataExists("b", "1") {
		t.Fatal("b's data was deleted")
	}
	st := n.Status().DBs["b"]
	if st.RemoveAt == nil || st.RemoveAt.Sub(*st.MissingSince) != 24*time.Hour {
		t.Fatalf("status remove_at %v, missing since %v; want 24h later", st.RemoveAt, st.MissingSince)
	}
	waitFor(t, "the refresh loop's removal due when the status says", func() bool {
		return n.removeAt.Load() == st.RemoveAt.UnixNano()
	})
	if !n.missingSince("a").IsZero() {
		t.Fatal("a, still listed, is marked missing")
	}
	waitFor(t, "spangle_db_missing_from_source_seconds{db=b} to grow", func() bool {
		return nodetest.Metric(t, reg, "spangle_db_missing_from_source_seconds", "db", "b") > 0
	})
	if got := nodetest.Metric(t, reg, "spangle_db_missing_from_source_seconds", "db", "a"); got != 0 {
		t.Fatalf("spangle_db_missing_from_source_seconds{db=a} = %v", got)
	}

	// An empty listing (an unmounted mount point): nothing goes.
	if err := os.Rename(filepath.Join(root, "a"), filepath.Join(aside, "a")); err != nil {
		t.Fatal(err)
	}
	n.Refresh()
	waitFor(t, "a marked missing", func() bool { return !n.missingSince("a").IsZero() })
	n.checkServes(t, "a", "1", 5)
	n.checkServes(t, "b", "1", 5)
	if !n.Ready() {
		t.Fatal("not ready")
	}

	// Both come back: no longer missing, nothing rebuilt.
	for _, db := range []string{"a", "b"} {
		if err := os.Rename(filepath.Join(aside, db), filepath.Join(root, db)); err != nil {
			t.Fatal(err)
		}
	}
	n.Refresh()
	waitFor(t, "a and b listed again, no removal due", func() bool {
		return n.missingSince("a").IsZero() && n.missingSince("b").IsZero() && n.removeAt.Load() == 0
	})
	n.checkServes(t, "b", "1", 5)
	if got := nodetest.Metric(t, reg, "spangle_db_missing_from_source_seconds", "db", "b"); got != 0 {
		t.Fatalf("spangle_db_missing_from_source_seconds{db=b} = %v after b came back", got)
	}
	if got := nodetest.Metric(t, reg, "spangle_dbs_removed_total"); got != 0 {
		t.Fatalf("spangle_dbs_removed_total = %v", got)
	}
}

// TestMissingDBRemovedAfterGrace: a db missing for remove_missing_after is
// removed, its files deleted, with no listing but the one that found it
// missing (refresh_period 0: the node's own timer lists again); a db that
// holds no version goes at once.
func TestMissingDBRemovedAfterGrace(t *testing.T) {
	const grace = 300 * time.Millisecond
	root := t.TempDir()
	writeVersion(t, root, "a", "1", 1, 5)
	writeVersion(t, root, "b", "1", 1, 5)
	if err := os.MkdirAll(filepath.Join(root, "never", "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "never", "1", "part-00000"), []byte("not a sequence file"), 0o644); err != nil {
		t.Fatal(err)
	}
	must0(t, os.WriteFile(filepath.Join(root, "never", "1", "_SUCCESS"), nil, 0o644))
	reg := prometheus.NewRegistry()
	n := newTestNode(t, root, func(c *Config) {
		c.RemoveMissingAfter = grace
		c.Registerer = reg
	})
	<-n.Loaded()
	if n.state("never", "1") != StateError {
		t.Fatalf("never/1 is %q, want ERROR", n.state("never", "1"))
	}
	must0(t, os.RemoveAll(filepath.Join(root, "b")))
	must0(t, os.RemoveAll(filepath.Join(root, "never")))
	n.Refresh()
	waitFor(t, "never removed", func() bool { _, ok := n.Status().DBs["never"]; return !ok })
	since := n.missingSince("b")
	if since.IsZero() {
		t.Fatal("b not marked missing, or removed at once")
	}
	waitFor(t, "b removed", func() bool {
		_, err := n.get(t, "b", "key-1")
		return errors.Is(err, ErrUnknownDB)
	})
	if waited := time.Since(since); waited < grace {
		t.Fatalf("b removed %v after it went missing, before remove_missing_after %v", waited, grace)
	}
	waitFor(t, "b's data deleted", func() bool { return !n.dataExists("b", "1") })
	n.checkServes(t, "a", "1", 5)
	waitFor(t, "spangle_dbs_removed_total{reason=missing} and {reason=empty} at 1", func() bool {
		return nodetest.Metric(t, reg, "spangle_dbs_removed_total", "reason", "missing") == 1 &&
			nodetest.Metric(t, reg, "spangle_dbs_removed_total", "reason", "empty") == 1
	})
}

// TestRemoveDB: an operator removes a db missing from the source at once;
// one the source lists, or one the node does not know, is refused.
func TestRemoveDB(t *testing.T) {
	root := t.TempDir()
	writeVersion(t, root, "a", "1", 1, 5)
	writeVersion(t, root, "b", "1", 1, 5)
	n := newTestNode(t, root, func(c *Config) { c.RemoveMissingAfter = -1 })
	<-n.Loaded()
	if err := n.RemoveDB("a"); !errors.Is(err, ErrDBInSource) {
		t.Fatalf("RemoveDB(a), listed: %v, want ErrDBInSource", err)
	}
	if err := n.RemoveDB("nosuch"); !errors.Is(err, ErrUnknownDB) {
		t.Fatalf("RemoveDB(nosuch): %v, want ErrUnknownDB", err)
	}
	must0(t, os.RemoveAll(filepath.Join(root, "b")))
	n.Refresh()
	waitFor(t, "b marked missing", func() bool { return !n.missingSince("b").IsZero() })
	if st := n.Status().DBs["b"]; st.RemoveAt != nil {
		t.Fatalf("remove_at %v with remove_missing_after negative", st.RemoveAt)
	}
	n.checkServes(t, "b", "1", 5)
	if err := n.RemoveDB("b"); err != nil {
		t.Fatal(err)
	}
	if _, err := n.get(t, "b", "key-1"); !errors.Is(err, ErrUnknownDB) {
		t.Fatalf("b after RemoveDB: %v", err)
	}
	if n.dataExists("b", "1") {
		t.Fatal("b's data is still on disk")
	}
	n.checkServes(t, "a", "1", 5)
}

// TestStartWithEmptySource: a node restarted on its data dir with an
// empty source (an unmounted mount point) serves what it has, and keeps
// it. Before, it deleted everything before serving.
func TestStartWithEmptySource(t *testing.T) {
	root := t.TempDir()
	writeVersion(t, root, "a", "1", 2, 20)
	cfg := DefaultConfig()
	cfg.Source = root
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.Logger = nodetest.Logger()
	n1, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	must0(t, n1.Start())
	<-n1.Loaded()
	must0(t, n1.Shutdown(context.Background()))

	empty := t.TempDir()
	cfg.Source = empty
	n2 := startTestNode(t, cfg)
	<-n2.Loaded()
	waitFor(t, "a marked missing", func() bool { return !n2.missingSince("a").IsZero() })
	n2.checkServes(t, "a", "1", 20)
	if !n2.dataExists("a", "1") || !n2.Ready() {
		t.Fatal("a's data deleted, or the node not ready")
	}
}

// TestFailedVersionGoneFromSource: a version that failed to build and is
// then deleted from the source leaves the status and
// spangle_db_versions{state="ERROR"} at the next listing. Before, it
// stayed ERROR (and SpangleVersionBuildFailed firing) until a newer
// version built.
func TestFailedVersionGoneFromSource(t *testing.T) {
	root := t.TempDir()
	writeVersion(t, root, "d", "1", 1, 5)
	bad := filepath.Join(root, "d", "2")
	must0(t, os.MkdirAll(bad, 0o755))
	must0(t, os.WriteFile(filepath.Join(bad, "part-00000"), []byte("not a sequence file"), 0o644))
	must0(t, os.WriteFile(filepath.Join(bad, "_SUCCESS"), nil, 0o644))
	reg := prometheus.NewRegistry()
	n := newTestNode(t, root, func(c *Config) { c.Registerer = reg })
	<-n.Loaded()
	waitFor(t, "d/2 failed", func() bool { return n.state("d", "2") == StateError })
	if got := nodetest.Metric(t, reg, "spangle_db_versions", "db", "d", "state", StateError); got != 1 {
		t.Fatalf("spangle_db_versions{state=ERROR} = %v, want 1", got)
	}
	must0(t, os.RemoveAll(bad))
	n.Refresh()
	waitFor(t, "d/2 gone from the status", func() bool { return n.state("d", "2") == "" })
	if got := nodetest.Metric(t, reg, "spangle_db_versions", "db", "d", "state", StateError); got != 0 {
		t.Fatalf("spangle_db_versions{state=ERROR} = %v after d/2 left the source, want 0", got)
	}
	n.checkServes(t, "d", "1", 5)
}
