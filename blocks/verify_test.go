package blocks

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// corruptPages overwrites n 4 KiB pages in the middle of the file at path
// with random bytes, keeping its size.
func corruptPages(t testing.TB, path string, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096
	pages := st.Size() / page
	if pages < int64(n)+4 {
		t.Fatalf("%s: only %d pages", path, pages)
	}
	r := rand.New(rand.NewPCG(1, 2))
	junk := make([]byte, n*page)
	for i := range junk {
		junk[i] = byte(r.Uint32())
	}
	// Past the two meta pages and the freelist, so that bbolt still opens
	// the file and fails (or panics) only on the pages a lookup reaches.
	if _, err := f.WriteAt(junk, (pages/2)*page); err != nil {
		t.Fatal(err)
	}
}

// buildOnDisk builds version v1 of a 4-partition dataset in a store at dir
// and closes the store.
func buildOnDisk(t *testing.T, dir string) *dataset {
	t.Helper()
	d := makeDataset(t, datasetOpts{files: 4, perFile: 3000, seed: 5})
	s, err := OpenStore(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.Build(context.Background(), BuildSpec{DB: "db", Version: "v1", Files: d.files(t),
		Partitioner: sequinsPartitioner{}, PartitionerID: "sequins"})
	if err != nil {
		t.Fatal(err)
	}
	for _, pi := range v.Manifest().PartitionInfo {
		if !strings.HasPrefix(pi.FileChecksum, sumSplit) {
			t.Fatalf("partition %d: file checksum %q", pi.Partition, pi.FileChecksum)
		}
	}
	v.Close()
	s.Close()
	return d
}

// TestOpenVerifiesFiles: Open refuses, with ErrCorrupt naming the file, a
// version one of whose partition files was overwritten in place (same
// size) or truncated; an intact one opens, and a manifest without file
// checksums (written before them) is checked by size only.
func TestOpenVerifiesFiles(t *testing.T) {
	dir := t.TempDir()
	d := buildOnDisk(t, dir)
	vdir := filepath.Join(dir, "dbs", "db", "v1")
	p2 := filepath.Join(vdir, partitionFile(2))

	open := func(opts Options) (*Version, error) {
		t.Helper()
		s := openTestStore(t, dir, opts)
		defer s.Close()
		return s.Open("db", "v1")
	}
	v, err := open(Options{})
	if err != nil {
		t.Fatalf("intact version: %v", err)
	}
	checkVersion(t, v, d)
	v.Close()

	orig, err := os.ReadFile(p2)
	if err != nil {
		t.Fatal(err)
	}
	corruptPages(t, p2, 3)
	if _, err := open(Options{}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), partitionFile(2)) ||
		!strings.Contains(err.Error(), "checksum") {
		t.Fatalf("overwritten pages: %v, want ErrCorrupt naming %s's checksum", err, partitionFile(2))
	}

	// Truncated: the size alone tells, before any read.
	if err := os.WriteFile(p2, orig[:len(orig)-4096], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := open(Options{}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "bytes, the manifest says") {
		t.Fatalf("truncated file: %v", err)
	}

	// A manifest from before file checksums: size only.
	if err := os.WriteFile(p2, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	mpath := filepath.Join(vdir, manifestName)
	b, err := os.ReadFile(mpath)
	if err != nil {
		t.Fatal(err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for i := range m.PartitionInfo {
		m.PartitionInfo[i].FileChecksum = ""
	}
	if err := writeManifest(vdir, &m); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(mpath); strings.Contains(string(b), "file_checksum") {
		t.Fatal("old-style manifest still has file checksums")
	}
	v, err = open(Options{})
	if err != nil {
		t.Fatalf("old-style manifest, intact files: %v", err)
	}
	checkVersion(t, v, d)
	v.Close()
}

// TestCorruptPartitionNoPanic reads every key of a version with three
// overwritten pages, verification skipped so that the reads reach bbolt:
// no panic escapes (bbolt panics on such pages), the failures are
// ErrCorrupt, and Close returns promptly afterwards, so no read
// transaction leaked.
func TestCorruptPartitionNoPanic(t *testing.T) {
	dir := t.TempDir()
	d := buildOnDisk(t, dir)
	for p := range 4 {
		corruptPages(t, filepath.Join(dir, "dbs", "db", "v1", partitionFile(p)), 3)
	}
	s := openTestStore(t, dir, Options{SkipVerify: true})
	v, err := s.Open("db", "v1")
	if err != nil {
		t.Fatalf("open with SkipVerify: %v", err)
	}
	var corrupt, ok int
	for round := range 3 { // later rounds reuse (or replace) the read transactions
		for k := range d.want {
			p, _, _ := (sequinsPartitioner{}).Partition([]byte(k), d.n)
			_, err := v.Get(p, []byte(k))
			switch {
			case err == nil, errors.Is(err, ErrNotFound):
				ok++
			case errors.Is(err, ErrCorrupt):
				corrupt++
			default:
				t.Fatalf("round %d: Get: %v, want nil, ErrNotFound or ErrCorrupt", round, err)
			}
		}
	}
	if corrupt == 0 {
		t.Fatalf("no lookup met the corrupt pages (%d answered)", ok)
	}
	t.Logf("%d lookups failed with ErrCorrupt, %d answered", corrupt, ok)
	done := make(chan error, 1)
	go func() { done <- v.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close hangs: a read transaction leaked")
	}
}

// TestDamagedRootNoPanic: with every page past the meta pages of a
// serving version's file overwritten in place, the root bucket's page
// included, every lookup of either layout is ErrCorrupt: the panic bbolt
// raises while finding the data bucket, as a read transaction begins, is
// caught too (it escaped, and ended the process, before).
func TestDamagedRootNoPanic(t *testing.T) {
	d := makeDataset(t, datasetOpts{files: 1, perFile: 3000, seed: 5})
	for _, comp := range []Compression{CompressionNone, CompressionS2Blocks} {
		t.Run(string(comp), func(t *testing.T) {
			dir := t.TempDir()
			s := openTestStore(t, dir, Options{})
			v := build(t, s, BuildSpec{DB: "db", Version: "v1", Files: d.files(t), Compression: comp})
			defer v.Close()
			f, err := os.OpenFile(filepath.Join(dir, "dbs", "db", "v1", partitionFile(0)), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			// The page size, as the first meta page says (after the page
			// header, the magic and the version).
			var meta [28]byte
			if _, err := f.ReadAt(meta[:], 0); err != nil {
				t.Fatal(err)
			}
			page := int64(binary.LittleEndian.Uint32(meta[24:]))
			st, err := f.Stat()
			if err != nil {
				t.Fatal(err)
			}
			junk := bytes.Repeat([]byte{0xa5}, int(st.Size()-2*page))
			if _, err := f.WriteAt(junk, 2*page); err != nil {
				t.Fatal(err)
			}
			f.Close()
			for k := range d.want {
				if _, err := v.Get(0, []byte(k)); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Get(%s) = %v, want ErrCorrupt", k, err)
				}
			}
		})
	}
}

// BenchmarkVerify measures what Open adds per byte of partition files:
// sizes and XXH64 checksums of every file, read in parallel from the page
// cache (files just written), against reading the same files alone.
func BenchmarkVerify(b *testing.B) {
	dir := b.TempDir()
	d := makeDataset(b, datasetOpts{files: 8, perFile: 40000, seed: 9})
	s := openTestStore(b, dir, Options{})
	v := build(b, s, BuildSpec{DB: "db", Version: "v1", Files: d.files(b)})
	m := v.Manifest()
	vdir := filepath.Join(dir, "dbs", "db", "v1")
	b.Run("verify", func(b *testing.B) {
		b.SetBytes(m.StoredBytes)
		for b.Loop() {
			if err := verifyFiles(vdir, m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("read-only", func(b *testing.B) {
		b.SetBytes(m.StoredBytes)
		buf := make([]byte, 256<<10)
		for b.Loop() {
			for _, p := range m.Partitions {
				f, err := os.Open(filepath.Join(vdir, partitionFile(p)))
				if err != nil {
					b.Fatal(err)
				}
				for {
					if _, err := f.Read(buf); err != nil {
						break
					}
				}
				f.Close()
			}
		}
	})
}
