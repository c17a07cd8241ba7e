package node

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spangledb/spangle/blocks"
	"github.com/spangledb/spangle/node/nodetest"
)

// TestDeltaBadInput: each kind of bad delta fails with its reason in the
// version's status (ERROR), the version it would replace keeps serving
// every key, the bad version leaves no files, and nothing is lost: the
// source is left as it was, and once the input is put right the same
// version builds at the next try. One db each:
//   - nobase: the base is nowhere (not in the source, not held);
//   - hole: v4 over v3 over v2 over v1, v2 missing from the source (the
//     node holds v1): the error names v3's missing base;
//   - updel: a key both upserted and deleted;
//   - trunc: a _DELETES cut short;
//   - digest: a _DIGEST that does not match;
//   - garbled: a _DIGEST that does not parse;
//   - newer: a _BASE naming a version that is not older.
func TestDeltaBadInput(t *testing.T) {
	root := t.TempDir()
	dbs := []string{"nobase", "hole", "updel", "trunc", "digest", "garbled", "newer"}
	srcs := map[string]*deltaSource{}
	for _, db := range dbs {
		srcs[db] = newDeltaSource(t, root, db, 3)
		srcs[db].full("v1", 60)
	}
	n := newTestNode(t, root, nil)
	for _, db := range dbs {
		waitFor(t, db+" v1", func() bool { return n.activeVersion(db) == "v1" })
	}

	srcs["nobase"].write("v2", blocks.BaseFileName, []byte("v0\n"))
	nodetest.WriteVersion(t, root, "nobase", "v2", 1, nil)

	hole := srcs["hole"]
	hole.delta("v2", "v1", map[string]string{"key-1": "v2:1"}, nil, true)
	hole.delta("v3", "v2", map[string]string{"key-3": "v3:3"}, []string{"key-2"}, true)
	hole.delta("v4", "v3", map[string]string{"key-4": "v4:4"}, nil, true)
	v2 := filepath.Join(root, "hole", "v2")
	if err := os.Rename(v2, v2+".away"); err != nil {
		t.Fatal(err)
	}

	srcs["updel"].delta("v2", "v1", map[string]string{"key-5": "v2:5", "key-6": "v2:6"}, []string{"key-5"}, true)

	trunc := srcs["trunc"]
	trunc.delta("v2", "v1", map[string]string{"key-1": "v2:1"}, []string{"key-7", "key-8"}, true)
	dels, err := os.ReadFile(filepath.Join(root, "trunc", "v2", blocks.DeletesFileName))
	if err != nil {
		t.Fatal(err)
	}
	trunc.write("v2", blocks.DeletesFileName, dels[:len(dels)-5])

	srcs["digest"].delta("v2", "v1", map[string]string{"key-1": "v2:1"}, nil, false)

	srcs["garbled"].delta("v2", "v1", map[string]string{"key-1": "v2:1"}, nil, true)
	srcs["garbled"].write("v2", blocks.DigestFileName, []byte(`{"format":1,"partitions":`))

	srcs["newer"].delta("v2", "v1", map[string]string{"key-1": "v2:1"}, nil, true)
	srcs["newer"].write("v2", blocks.BaseFileName, []byte("v3"))

	source := snapshotDir(t, root)
	n.Refresh()
	want := map[string]struct{ version, reason string }{
		"nobase":  {"v2", "nobase/v2: its base v0 is not in the source, nor held here"},
		"hole":    {"v4", "hole/v3: its base v2 is not in the source, nor held here"},
		"updel":   {"v2", `both upserted and deleted`},
		"trunc":   {"v2", "truncated or damaged deletions file"},
		"digest":  {"v2", "digest/v2: digest mismatch: partition"},
		"garbled": {"v2", "_DIGEST: unexpected end of JSON input"},
		"newer":   {"v2", `newer/v2/_BASE names "v3": want the name of an older version`},
	}
	for db, w := range want {
		waitFor(t, db+" "+w.version+" to fail or go active", func() bool {
			return n.state(db, w.version) == StateError || n.activeVersion(db) == w.version
		})
		if e := n.Status().DBs[db].Versions[w.version].Nodes[n.Name()].Error; !strings.Contains(e, w.reason) {
			t.Errorf("%s %s: error %q, want %q (active %s)", db, w.version, e, w.reason, n.activeVersion(db))
		}
		if n.activeVersion(db) != "v1" {
			t.Fatalf("%s: active %s, want v1", db, n.activeVersion(db))
		}
		srcs[db].check(n, "v1")
		if _, err := os.Stat(filepath.Join(n.data, "dbs", db, w.version)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s %s left files: %v", db, w.version, err)
		}
	}
	if got := snapshotDir(t, root); got != source {
		t.Errorf("the source changed:\n%s\nwas\n%s", got, source)
	}

	// The input put right: each version builds at the next try.
	if err := os.Rename(v2+".away", v2); err != nil {
		t.Fatal(err)
	}
	srcs["updel"].delta("v2", "v1", map[string]string{"key-5": "v2:5", "key-6": "v2:6"}, nil, true)
	trunc.write("v2", blocks.DeletesFileName, dels)
	for _, db := range []string{"digest", "garbled"} {
		srcs[db].write("v2", blocks.DigestFileName, srcs[db].digest(srcs[db].sets["v2"]))
	}
	srcs["newer"].write("v2", blocks.BaseFileName, []byte("v1"))
	n.Refresh()
	for db, w := range want {
		if db == "nobase" {
			continue
		}
		waitFor(t, db+" "+w.version+" once put right", func() bool { return n.activeVersion(db) == w.version })
		srcs[db].check(n, w.version)
	}
	hole.check(n, "v4", "key-2")
	trunc.check(n, "v2", "key-7", "key-8")
}

// snapshotDir lists every file under root with the SHA-256 of its
// content, one a line, in walk order.
func snapshotDir(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		fmt.Fprintf(&b, "%s %x\n", rel, sha256.Sum256(data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
