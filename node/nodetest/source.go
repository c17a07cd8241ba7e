package nodetest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/spangledb/spangle/blocks/seqfile"
)

// Record is one key and value of a SequenceFile.
type Record struct{ Key, Value []byte }

// WriteFile writes records at path, creating its directory, as an
// uncompressed SequenceFile of BytesWritable. With no records it writes a
// file that is a header only.
func WriteFile(t testing.TB, path string, records []Record) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := seqfile.NewWriter(f, seqfile.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range records {
		if err := w.Append(r.Key, r.Value); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// WriteVersion writes version of db under the source root: files
// SequenceFiles root/db/version/part-00000, part-00001, … with records
// dealt round robin (a part may be empty), then an empty _SUCCESS.
func WriteVersion(t testing.TB, root, db, version string, files int, records []Record) {
	t.Helper()
	dir := filepath.Join(root, db, version)
	parts := make([][]Record, files)
	for i, r := range records {
		parts[i%files] = append(parts[i%files], r)
	}
	for i, recs := range parts {
		WriteFile(t, filepath.Join(dir, fmt.Sprintf("part-%05d", i)), recs)
	}
	if err := os.WriteFile(filepath.Join(dir, "_SUCCESS"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Numbered returns n records key-<i> → <version>:<i>, so that a reader
// can tell from a value which version answered.
func Numbered(version string, n int) []Record {
	rs := make([]Record, n)
	for i := range rs {
		rs[i] = Record{fmt.Appendf(nil, "key-%d", i), fmt.Appendf(nil, "%s:%d", version, i)}
	}
	return rs
}
