package blocks

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFileChecksumWhileWritten: the default writer records a split
// checksum (hashed as it wrote, no read back) that matches the file's
// bytes, read whole or fed a byte at a time; a TxWrites build records the
// whole-file kind; VerifyPartitionFile takes both and refuses a changed
// byte in the head (written last) or the body, and a manifest whose
// checksums are the whole-file kind of older releases still opens.
func TestFileChecksumWhileWritten(t *testing.T) {
	dir := t.TempDir()
	d := buildOnDisk(t, dir)
	vdir := filepath.Join(dir, "dbs", "db", "v1")
	s := openTestStore(t, dir, Options{})
	v, err := s.Open("db", "v1")
	if err != nil {
		t.Fatal(err)
	}
	m := *v.Manifest()
	v.Close()
	s.Close()
	for _, pi := range m.PartitionInfo {
		path := filepath.Join(vdir, partitionFile(pi.Partition))
		if !strings.HasPrefix(pi.FileChecksum, sumSplit) {
			t.Fatalf("partition %d: checksum %q, want the split kind", pi.Partition, pi.FileChecksum)
		}
		if err := VerifyPartitionFile(path, pi); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		fs, err := NewFileSum(pi.FileChecksum)
		if err != nil {
			t.Fatal(err)
		}
		for i := range b {
			fs.Write(b[i : i+1])
		}
		if err := fs.Check(); err != nil {
			t.Fatalf("byte at a time: %v", err)
		}
		for _, off := range []int{100, len(b) - 100} { // the head, the body
			c := append([]byte(nil), b...)
			c[off] ^= 1
			if err := os.WriteFile(path, c, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := VerifyPartitionFile(path, pi); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "checksum") {
				t.Fatalf("byte %d changed: %v", off, err)
			}
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// An older release's manifest: whole-file checksums.
	for i, pi := range m.PartitionInfo {
		sum, err := fileChecksum(filepath.Join(vdir, partitionFile(pi.Partition)))
		if err != nil {
			t.Fatal(err)
		}
		m.PartitionInfo[i].FileChecksum = sum
	}
	if err := writeManifest(vdir, &m); err != nil {
		t.Fatal(err)
	}
	s = openTestStore(t, dir, Options{})
	v, err = s.Open("db", "v1")
	if err != nil {
		t.Fatalf("whole-file checksums: %v", err)
	}
	checkVersion(t, v, d)
	v.Close()
	s.Close()

	// TxWrites: read back, the whole-file kind.
	ts := openTestStore(t, t.TempDir(), Options{TxWrites: true})
	tv, err := ts.Build(context.Background(), BuildSpec{DB: "db", Version: "v1", Files: d.files(t),
		Partitioner: sequinsPartitioner{}, PartitionerID: "sequins"})
	if err != nil {
		t.Fatal(err)
	}
	defer tv.Close()
	for _, pi := range tv.Manifest().PartitionInfo {
		if !strings.HasPrefix(pi.FileChecksum, sumWhole) {
			t.Fatalf("tx writes: partition %d: checksum %q", pi.Partition, pi.FileChecksum)
		}
	}
}

// TestFileSumMalformed: a checksum from the manifest that is not one of
// the two kinds is refused.
func TestFileSumMalformed(t *testing.T) {
	for _, want := range []string{"", "xxh64:12", "md5:0123456789abcdef", "xxh64s:-1:0123456789abcdef", "xxh64s:x:0123456789abcdef", "xxh64s:4096"} {
		if _, err := NewFileSum(want); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%q: %v", want, err)
		}
	}
}
