package blocks

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// openWithoutIndex opens db/version of s a second time, its partitions
// read through bbolt's walk as before the index of first keys.
func openWithoutIndex(t *testing.T, s *Store, db, version string) *Version {
	t.Helper()
	v, err := s.Open(db, version)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	for _, part := range v.contents.Load().parts {
		if part != nil {
			part.index = nil
		}
	}
	return v
}

// sameGet fails t unless v and w answer Get(p, key) alike.
func sameGet(t *testing.T, v, w *Version, p int, key []byte) {
	t.Helper()
	a, errA := v.Get(p, key)
	b, errB := w.Get(p, key)
	if !bytes.Equal(a, b) || (errA == nil) != (errB == nil) || errA != nil && !errors.Is(errA, ErrNotFound) || errB != nil && !errors.Is(errB, ErrNotFound) {
		t.Fatalf("Get(%d, %q): %.20q, %v through the index; %.20q, %v through bbolt", p, key, a, errA, b, errB)
	}
}

// TestBlockIndex: every key of an s2-blocks partition reads the same
// through the index of blocks by first key as through bbolt's walk, and
// so does every key before, between and after them (ErrNotFound): a
// large record in a block of its own and an empty value too. The
// index's bytes are what IndexBytes says: 24 a block besides the first
// keys and a bit.
func TestBlockIndex(t *testing.T) {
	dir := t.TempDir()
	var recs []record
	for i := range 20000 {
		k := fmt.Appendf(nil, "key-%06d", 2*i) // odd numbers are missing
		v := fmt.Appendf(nil, `{"id":%d,"name":"user %d","tags":["alpha","bravo"]}`, i, i%97)
		switch i {
		case 10:
			v = bytes.Repeat([]byte("large "), 2*BlockSize)
		case 11:
			v = []byte{}
		}
		recs = append(recs, record{k, v})
	}
	writeSeqFile(t, filepath.Join(dir, "part-00000"), recs)
	s := openTestStore(t, t.TempDir(), Options{})
	v := build(t, s, BuildSpec{DB: "db", Version: "v1", Files: sourceFiles(t, dir, []string{"part-00000"}),
		Compression: CompressionS2Blocks})
	x := v.contents.Load().parts[0].index
	if x == nil || len(x.lens) < 50 {
		t.Fatalf("index %v: want one of every block", x)
	}
	w := openWithoutIndex(t, s, "db", "v1")
	for i := range 2*len(recs) + 1 {
		sameGet(t, v, w, 0, fmt.Appendf(nil, "key-%06d", i))
	}
	for _, k := range []string{"", "a", "key-", "key-0", "key-000020a", "key-039998\x00", "key-1", "kez", "zzz"} {
		sameGet(t, v, w, 0, []byte(k))
	}
	blocks := int64(len(x.lens))
	if got, want := v.IndexBytes(), blocks*(24+10)+4+8*((blocks+63)/64)+int64(len(x.common)); got != want {
		t.Errorf("IndexBytes = %d, want %d (%d blocks of 24 bytes, a 10-byte first key and a bit; the common prefix %q)", got, want, blocks, x.common)
	}
}

// TestBlockIndexEmptyPartitions: partitions without records have an
// empty index, and every key of the others reads.
func TestBlockIndexEmptyPartitions(t *testing.T) {
	d := makeDataset(t, datasetOpts{files: 20, perFile: 1, seed: 3})
	s := openTestStore(t, t.TempDir(), Options{})
	v := build(t, s, BuildSpec{DB: "db", Version: "v1", Files: d.files(t), Compression: CompressionS2Blocks})
	checkVersion(t, v, d)
	empty := 0
	for p, part := range v.contents.Load().parts {
		if part.index == nil {
			t.Fatalf("partition %d: no index", p)
		}
		if len(part.index.lens) == 0 {
			empty++
			if _, err := v.Get(p, []byte("k")); !errors.Is(err, ErrNotFound) {
				t.Errorf("Get of an empty partition: %v, want ErrNotFound", err)
			}
		}
	}
	if empty == 0 {
		t.Fatal("no empty partition: the test needs one")
	}
}

// TestGetCutShort: a partition file truncated beneath its memory map
// while the version serves gives ErrCorrupt for the keys whose bytes are
// gone, in either layout, instead of a SIGBUS ending the process (it did
// before getAppend turned faults into panics: the test binary dies).
func TestGetCutShort(t *testing.T) {
	d := makeDataset(t, datasetOpts{files: 1, perFile: 5000, seed: 5, repetitive: true})
	for _, comp := range []Compression{CompressionNone, CompressionS2Blocks} {
		t.Run(string(comp), func(t *testing.T) {
			dir := t.TempDir()
			s := openTestStore(t, dir, Options{})
			v := build(t, s, BuildSpec{DB: "db", Version: "v1", Files: d.files(t), Compression: comp})
			if err := os.Truncate(filepath.Join(dir, "dbs", "db", "v1", partitionFile(0)), 3*4096); err != nil {
				t.Fatal(err)
			}
			corrupt := 0
			for k := range d.want {
				switch _, err := v.Get(0, []byte(k)); {
				case errors.Is(err, ErrCorrupt):
					corrupt++
				case err != nil && !errors.Is(err, ErrNotFound):
					t.Fatalf("Get(%x) = %v, want a value, ErrNotFound or ErrCorrupt", k, err)
				}
			}
			if corrupt == 0 {
				t.Fatal("no lookup met the missing pages")
			}
			t.Logf("%d of %d lookups ErrCorrupt", corrupt, len(d.want))
		})
	}
}

// TestBlockIndexDamagedPages: an s2-blocks partition with pages
// overwritten before it opens (checksums skipped) opens, with or without
// an index (the walk gives up on what it does not expect), and its
// lookups answer, are ErrNotFound or ErrCorrupt: never a panic.
func TestBlockIndexDamagedPages(t *testing.T) {
	d := makeDataset(t, datasetOpts{files: 2, perFile: 4000, seed: 9})
	dir := t.TempDir()
	s := openTestStore(t, dir, Options{SkipVerify: true})
	build(t, s, BuildSpec{DB: "db", Version: "v1", Files: d.files(t), Compression: CompressionS2Blocks}).Close()
	for p := range 2 {
		corruptPages(t, filepath.Join(dir, "dbs", "db", "v1", partitionFile(p)), 3)
	}
	v, err := s.Open("db", "v1")
	if err != nil {
		t.Fatalf("open with SkipVerify: %v", err)
	}
	defer v.Close()
	corrupt := 0
	for k := range d.want {
		p, _, _ := (sequinsPartitioner{}).Partition([]byte(k), d.n)
		switch _, err := v.Get(p, []byte(k)); {
		case errors.Is(err, ErrCorrupt):
			corrupt++
		case err != nil && !errors.Is(err, ErrNotFound):
			t.Fatalf("Get: %v, want nil, ErrNotFound or ErrCorrupt", err)
		}
	}
	if corrupt == 0 {
		t.Fatal("no lookup met the damaged pages")
	}
}

// flipInBlock changes a byte near the end of block i of partition 0 of
// v in its file (in the last record's value: with random values, in an
// S2 literal, so the block still decodes and only its CRC tells).
func flipInBlock(t *testing.T, dir string, v *Version, i int) {
	t.Helper()
	x := v.contents.Load().parts[0].index
	f, err := os.OpenFile(filepath.Join(dir, "dbs", "db", "v1", partitionFile(0)), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	at := int64(x.offs[i]) + int64(x.lens[i]) - 20
	b := []byte{0}
	if _, err := f.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x01
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
}

// TestBlockCRCOnce: a Get checks a block's CRC on its first read after
// the version opened, and not again: a block damaged before its first
// read is ErrCorrupt on that read and every later one; a block damaged
// after its first read (the file changed beneath a serving version) is
// not caught until the version is opened again. Without the once, the
// read after the late damage is ErrCorrupt and the test fails.
func TestBlockCRCOnce(t *testing.T) {
	d := makeDataset(t, datasetOpts{files: 1, perFile: 3000, seed: 11})
	dir := t.TempDir()
	s := openTestStore(t, dir, Options{SkipVerify: true}) // the file changes below
	build(t, s, BuildSpec{DB: "db", Version: "v1", Files: d.files(t), Compression: CompressionS2Blocks}).Close()
	v, err := s.Open("db", "v1")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	x := v.contents.Load().parts[0].index
	if len(x.lens) < 4 {
		t.Fatalf("%d blocks: the test needs more", len(x.lens))
	}
	early, late := 1, 2
	earlyKey, lateKey := bytes.Clone(x.first(early)), bytes.Clone(x.first(late))

	flipInBlock(t, dir, v, early)
	for range 2 {
		if _, err := v.Get(0, earlyKey); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Get of a block damaged before its first read = %v, want ErrCorrupt", err)
		}
	}
	if x.isChecked(early) {
		t.Error("a damaged block marked checked")
	}

	want := d.want[string(lateKey)]
	if got, err := v.Get(0, lateKey); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Get = %x, %v; want %x", got, err, want)
	}
	if !x.isChecked(late) {
		t.Fatal("a block read whole not marked checked")
	}
	flipInBlock(t, dir, v, late)
	if got, err := v.Get(0, lateKey); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Get of a checked block damaged after = %x, %v; want its first record's value (the CRC is not checked again)", got, err)
	}
	w, err := s.Open("db", "v1")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Get(0, lateKey); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Get after opening again = %v, want ErrCorrupt", err)
	}
}

// TestBlockIndexFind: the index's search (8-byte integers past the
// shared prefix, whole keys where those are equal) finds the last first
// key not after the key, as a plain search of the sorted keys does, for
// first keys of any lengths sharing prefixes of any lengths, and keys
// before, among and after them.
func TestBlockIndexFind(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	randKey := func(prefix string) []byte {
		k := []byte(prefix)
		for range r.IntN(14) {
			k = append(k, "ab\x00\xff"[r.IntN(4)])
		}
		return k
	}
	for round := range 300 {
		prefix := strings.Repeat("p", r.IntN(12))
		set := map[string]bool{}
		for range r.IntN(40) {
			set[string(randKey(prefix))] = true
		}
		firsts := slices.Sorted(maps.Keys(set))
		x := &blockIndex{keyOffs: []uint32{0}}
		for _, k := range firsts {
			x.keys = append(x.keys, k...)
			x.keyOffs = append(x.keyOffs, uint32(len(x.keys)))
			x.offs, x.lens = append(x.offs, 0), append(x.lens, 0)
		}
		x.place()
		probes := append([][]byte{nil, []byte(prefix), []byte("o"), []byte("q")}, randKey(prefix), randKey(""), randKey(prefix[:len(prefix)/2]))
		for _, k := range firsts {
			probes = append(probes, []byte(k), append([]byte(k), 0), []byte(k[:len(k)/2]))
		}
		for _, key := range probes {
			want := sort.Search(len(firsts), func(i int) bool { return firsts[i] > string(key) }) - 1
			if got := x.find(key); got != want {
				t.Fatalf("round %d: find(%q) = %d, want %d, among %q (shared %q)", round, key, got, want, firsts, x.common)
			}
		}
		x.free()
	}
}
