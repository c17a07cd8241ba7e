package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spangledb/spangle/node/nodetest"
)

// testTimeout bounds every wait in these tests.
const testTimeout = 30 * time.Second

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	nodetest.WaitFor(t, testTimeout, what, nodetest.True(cond))
}

// writeVersion writes version of db under root as `files` SequenceFiles
// holding keys key-0..key-(n-1) with values "<version>:<i>", and _SUCCESS.
func writeVersion(t testing.TB, root, db, version string, files, n int) {
	t.Helper()
	nodetest.WriteVersion(t, root, db, version, files, nodetest.Numbered(version, n))
}

func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

type testNode struct {
	*Node
	root, data string
}

func newTestNode(t testing.TB, root string, mod func(*Config)) *testNode {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Source = root
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	// Tests write versions while nodes run: _SUCCESS, written last, marks
	// them complete.
	cfg.RequireSuccessFile = true
	cfg.Plugins.CallTimeout = 10 * time.Second // a loaded CI machine under -race
	cfg.Logger = nodetest.Logger()
	if mod != nil {
		mod(&cfg)
	}
	return startTestNode(t, cfg)
}

func startTestNode(t testing.TB, cfg Config) *testNode {
	t.Helper()
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nodetest.Start(t, n)
	return &testNode{Node: n, root: cfg.Source, data: cfg.DataDir}
}

func (n *testNode) get(t testing.TB, db, key string) (Result, error) {
	t.Helper()
	return n.Get(context.Background(), db, []byte(key), GetOptions{})
}

func (n *testNode) activeVersion(db string) string {
	d := (*n.dbs.Load())[db]
	if d == nil {
		return ""
	}
	if v := d.active.Load(); v != nil {
		return v.name
	}
	return ""
}

// waitRetired waits until version of db is gone from the status, which
// happens once its files are deleted.
func (n *testNode) waitRetired(t testing.TB, db, version string) {
	t.Helper()
	waitFor(t, db+"/"+version+" retired", func() bool {
		_, ok := n.Status().DBs[db].Versions[version]
		return !ok
	})
}

func (n *testNode) state(db, version string) string {
	st, ok := n.Status().DBs[db]
	if !ok {
		return ""
	}
	return st.Versions[version].Nodes[n.Name()].State
}

// TestBabyNames serves the sequins fixture and checks every key of
// EXPECTED.json.
func TestBabyNames(t *testing.T) {
	root := t.TempDir()
	copyDir(t, filepath.Join("..", "testdata", "sequins", "history-011971a", "testdata", "baby-names"), filepath.Join(root, "baby-names"))
	n := newTestNode(t, root, func(c *Config) { c.RequireSuccessFile = false })

	raw, err := os.ReadFile(filepath.Join("..", "testdata", "sequins", "EXPECTED.json"))
	if err != nil {
		t.Fatal(err)
	}
	var expected struct {
		Files map[string]struct {
			Format  string          `json:"format"`
			Records json.RawMessage `json:"records"`
		} `json:"files"`
	}
	if err := json.Unmarshal(raw, &expected); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for name, f := range expected.Files {
		if !strings.HasPrefix(name, "history-011971a/testdata/baby-names/") {
			continue
		}
		var recs []struct{ Key, Value string }
		if err := json.Unmarshal(f.Records, &recs); err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			res, err := n.get(t, "baby-names", r.Key)
			if err != nil || !res.Found || string(res.Value) != r.Value || res.Version != "1" {
				t.Errorf("Get(%q) = %q found=%v version=%q err=%v; want %q", r.Key, res.Value, res.Found, res.Version, err, r.Value)
			}
			checked++
		}
	}
	if checked != 258 {
		t.Fatalf("checked %d keys, want 258", checked)
	}
	res, err := n.get(t, "baby-names", "1881/nobody")
	if err != nil || res.Found || res.Version != "1" {
		t.Fatalf("missing key: %+v, %v", res, err)
	}
	if _, err := n.get(t, "nope", "x"); !errors.Is(err, ErrUnknownDB) {
		t.Fatalf("unknown db: %v", err)
	}
	if _, err := n.Get(context.Background(), "baby-names", []byte("1881/boy"), GetOptions{Version: "2"}); !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("unknown version: %v", err)
	}
	if res, err := n.Get(context.Background(), "baby-names", []byte("1881/boy"), GetOptions{Version: "1"}); err != nil || string(res.Value) != "John" {
		t.Fatalf("pinned version: %+v %v", res, err)
	}

	st := n.Status().DBs["baby-names"].Versions["1"]
	if st.NumPartitions != 20 || st.MissingPartitions != 0 || st.AverageReplication != 1 || st.ReplicationHistogram[1] != 20 {
		t.Fatalf("status: %+v", st)
	}
	nv := st.Nodes["localhost"]
	if nv.State != StateActive || !nv.Current || nv.ActiveAt == nil || len(nv.Partitions) != 20 {
		t.Fatalf("node status: %+v", nv)
	}
	if st.Build == nil || st.Build.Records != 258 || st.Build.Percent != 100 {
		t.Fatalf("build progress: %+v", st.Build)
	}
}

// TestDiscovery covers sequins' version rules: valid names only, byte-wise
// order, _SUCCESS when required, files starting with _ or . ignored.
func TestDiscovery(t *testing.T) {
	for _, tc := range []struct {
		name           string
		requireSuccess bool
		setup          func(t *testing.T, root string)
		want           string // active version of db "d", "" for none
	}{
		{"bytewise order", false, func(t *testing.T, root string) {
			writeVersion(t, root, "d", "10", 2, 10)
			writeVersion(t, root, "d", "2", 2, 10)
		}, "2"},
		{"invalid names ignored", false, func(t *testing.T, root string) {
			writeVersion(t, root, "d", "1", 2, 10)
			writeVersion(t, root, "d", "{ invalid_version }", 2, 10)
			writeVersion(t, root, "d", "zz.tmp", 2, 10)
		}, "1"},
		{"success required", true, func(t *testing.T, root string) {
			writeVersion(t, root, "d", "1", 2, 10)
			writeVersion(t, root, "d", "2", 2, 10)
			if err := os.Remove(filepath.Join(root, "d", "2", "_SUCCESS")); err != nil {
				t.Fatal(err)
			}
		}, "1"},
		{"success not required", false, func(t *testing.T, root string) {
			writeVersion(t, root, "d", "1", 2, 10)
			writeVersion(t, root, "d", "2", 2, 10)
			if err := os.Remove(filepath.Join(root, "d", "2", "_SUCCESS")); err != nil {
				t.Fatal(err)
			}
		}, "2"},
		{"a file at version level is not a version", false, func(t *testing.T, root string) {
			writeVersion(t, root, "d", "1", 2, 10)
			nodetest.WriteFile(t, filepath.Join(root, "d", "9"), []nodetest.Record{{Key: []byte("a"), Value: []byte("b")}})
		}, "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			tc.setup(t, root)
			n := newTestNode(t, root, func(c *Config) { c.RequireSuccessFile = tc.requireSuccess })
			if got := n.activeVersion("d"); got != tc.want {
				t.Fatalf("active version %q, want %q", got, tc.want)
			}
		})
	}
}

// TestIgnoredFiles checks that _ and . files and subdirectories are not
// data: N counts only data files.
func TestIgnoredFiles(t *testing.T) {
	root := t.TempDir()
	writeVersion(t, root, "d", "1", 3, 30)
	dir := filepath.Join(root, "d", "1")
	for _, name := range []string{"_metadata", ".crc", "_logs/history"} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("not a sequencefile"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n := newTestNode(t, root, nil)
	if st := n.Status().DBs["d"].Versions["1"]; st.NumPartitions != 3 {
		t.Fatalf("partitions %d, want 3 (status %+v)", st.NumPartitions, st)
	}
	for i := range 30 {
		res, err := n.get(t, "d", fmt.Sprintf("key-%d", i))
		if err != nil || string(res.Value) != fmt.Sprintf("1:%d", i) {
			t.Fatalf("key-%d: %+v %v", i, res, err)
		}
	}
}

func TestEmptyVersion(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "d", "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	n := newTestNode(t, root, func(c *Config) { c.RequireSuccessFile = false })
	res, err := n.get(t, "d", "anything")
	if err != nil || res.Found || res.Version != "1" {
		t.Fatalf("empty version: %+v %v", res, err)
	}
}

// TestBadVersionKeepsServing: a corrupt version is ERROR, the previous one
// keeps serving, and an older version appearing later is never taken.
func TestBadVersionKeepsServing(t *testing.T) {
	root := t.TempDir()
	writeVersion(t, root, "d", "1", 2, 20)
	n := newTestNode(t, root, nil)

	bad := filepath.Join(root, "d", "2")
	writeVersion(t, root, "d", "2", 2, 20)
	if err := os.WriteFile(filepath.Join(bad, "part-00001"), []byte("This is an invalid sequence file"), 0o644); err != nil {
		t.Fatal(err)
	}
	n.Refresh()
	waitFor(t, "version 2 to fail", func() bool { return n.state("d", "2") == StateError })
	st := n.Status().DBs["d"].Versions["2"].Nodes["localhost"]
	if !strings.Contains(st.Error, "part-00001") {
		t.Errorf("error %q does not name the file", st.Error)
	}
	if res, err := n.get(t, "d", "key-3"); err != nil || string(res.Value) != "1:3" {
		t.Fatalf("after failed build: %+v %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(n.data, "dbs", "d", "2")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("failed build left data behind: %v", err)
	}

	// An older version is never taken.
	writeVersion(t, root, "d", "0", 2, 20)
	// A good version 3 is.
	writeVersion(t, root, "d", "3", 2, 20)
	n.Refresh()
	waitFor(t, "version 3", func() bool { return n.activeVersion("d") == "3" })
	n.waitRetired(t, "d", "1")
	if res, err := n.get(t, "d", "key-3"); err != nil || string(res.Value) != "3:3" {
		t.Fatalf("after upgrade: %+v %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(n.data, "dbs", "d", "1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("old version not removed: %v", err)
	}
	// The failed version 2 is dropped after the switch, not with it: the
	// switch retires version 1 first.
	waitFor(t, "failed version 2 dropped after version 3 became active", func() bool {
		_, ok := n.Status().DBs["d"].Versions["2"]
		return !ok
	})
}

// TestPartiallyHealthy loads sequins' fixture: one good db, one whose only
// file is not a SequenceFile.
func TestPartiallyHealthy(t *testing.T) {
	root := t.TempDir()
	copyDir(t, filepath.Join("..", "testdata", "sequins", "test_databases", "partially_healthy"), root)
	n := newTestNode(t, root, func(c *Config) { c.RequireSuccessFile = false })
	if got := n.state("baby-names", "1"); got != StateActive {
		t.Fatalf("baby-names state %q", got)
	}
	if got := n.state("baby-names-bad", "1"); got != StateError {
		t.Fatalf("baby-names-bad state %q", got)
	}
	if _, err := n.get(t, "baby-names-bad", "x"); !errors.Is(err, ErrNoVersion) {
		t.Fatalf("bad db: %v", err)
	}
	if res, err := n.get(t, "baby-names", "1881/boy"); err != nil || string(res.Value) != "John" {
		t.Fatalf("good db: %+v %v", res, err)
	}
}

// TestRestartReuses: a restarted node serves its complete version from disk
// without rebuilding it.
func TestRestartReuses(t *testing.T) {
	root := t.TempDir()
	writeVersion(t, root, "d", "1", 2, 50)
	cfg := DefaultConfig()
	cfg.Source = root
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	n1, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n1.Start(); err != nil {
		t.Fatal(err)
	}
	<-n1.Loaded()
	if err := n1.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Remove the source files: a rebuild would now fail.
	for _, f := range []string{"part-00000", "part-00001"} {
		if err := os.WriteFile(filepath.Join(root, "d", "1", f), []byte("gone"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n2 := startTestNode(t, cfg)
	if res, err := n2.get(t, "d", "key-7"); err != nil || string(res.Value) != "1:7" {
		t.Fatalf("after restart: %+v %v", res, err)
	}
	if st := n2.Status().DBs["d"].Versions["1"]; st.Build != nil {
		t.Fatalf("version was rebuilt: %+v", st.Build)
	}
}

// TestUpgradesUnderLoad drives readers through 50 consecutive upgrades:
// no request may fail, and no reader may see a version older than one it
// saw before.
func TestUpgradesUnderLoad(t *testing.T) {
	const upgrades, keys, readers = 50, 200, 8
	root := t.TempDir()
	writeVersion(t, root, "d", vname(0), 4, keys)
	n := newTestNode(t, root, nil)

	var stop atomic.Bool
	var wg sync.WaitGroup
	var requests atomic.Int64
	errs := make(chan error, readers)
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := ""
			for i := r; !stop.Load(); i++ {
				key := fmt.Sprintf("key-%d", i%keys)
				res, err := n.get(t, "d", key)
				if err != nil || !res.Found {
					errs <- fmt.Errorf("Get(%s): found=%v err=%v", key, res.Found, err)
					return
				}
				if res.Version < last {
					errs <- fmt.Errorf("version went back from %s to %s", last, res.Version)
					return
				}
				if want := fmt.Sprintf("%s:%d", res.Version, i%keys); string(res.Value) != want {
					errs <- fmt.Errorf("Get(%s) = %q from version %s, want %q (mixed versions)", key, res.Value, res.Version, want)
					return
				}
				last = res.Version
				requests.Add(1)
			}
		}()
	}
	for u := 1; u <= upgrades; u++ {
		writeVersion(t, root, "d", vname(u), 4, keys)
		n.Refresh()
		waitFor(t, "version "+vname(u), func() bool { return n.activeVersion("d") == vname(u) || len(errs) > 0 })
		if len(errs) > 0 {
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	n.waitRetired(t, "d", vname(upgrades-1))
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if requests.Load() < upgrades {
		t.Fatalf("only %d requests during %d upgrades", requests.Load(), upgrades)
	}
	entries, err := os.ReadDir(filepath.Join(n.data, "dbs", "d"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != vname(upgrades) {
		t.Fatalf("data dir holds %v, want only version %s", entries, vname(upgrades))
	}
}

// version names sort byte-wise in upgrade order.
func vname(i int) string { return fmt.Sprintf("v%04d", i) }
