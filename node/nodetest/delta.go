package nodetest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/spangledb/spangle/blocks"
)

// Deletes returns the content of a _DELETES file naming keys
// (blocks.NewDeletesWriter).
func Deletes(t testing.TB, keys ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := blocks.NewDeletesWriter(&b)
	for _, k := range keys {
		if err := w.Add([]byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// WriteDelta writes version of db under the source root as a batch job
// writes a delta over base: the upserts in one SequenceFile, the deleted
// keys in _DELETES, _BASE, _SUCCESS; complete at once (written aside,
// then renamed into place: root/db must exist).
func WriteDelta(t testing.TB, root, db, version, base string, upserts []Record, deletes ...string) {
	t.Helper()
	tmp := t.TempDir()
	WriteVersion(t, tmp, db, version, 1, upserts)
	dir := filepath.Join(tmp, db, version)
	if err := os.WriteFile(filepath.Join(dir, blocks.BaseFileName), []byte(base+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, blocks.DeletesFileName), Deletes(t, deletes...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir, filepath.Join(root, db, version)); err != nil {
		t.Fatal(err)
	}
}
