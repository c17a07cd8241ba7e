package blocks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/spangledb/spangle/blocks/seqfile"
)

func TestBuildGet(t *testing.T) {
	d := makeDataset(t, datasetOpts{files: 5, perFile: 400, dupEvery: 7, seed: 1})
	var sums map[int]string // every build must store the same content
	tests := []struct {
		name       string
		comp       Compression
		txWrites   bool
		partitions []int
	}{
		{"none", CompressionNone, false, nil},
		{"s2", CompressionS2, false, nil},
		{"zstd", CompressionZstd, false, nil},
		{"s2-blocks", CompressionS2Blocks, false, nil},
		{"s2-blocks tx", CompressionS2Blocks, true, nil},
		{"none tx", CompressionNone, true, nil},
		{"zstd tx", CompressionZstd, true, nil},
		{"subset", CompressionNone, false, []int{3, 1}},
		{"subset zstd", CompressionZstd, false, []int{0, 4, 4}},
		{"none held", CompressionNone, false, []int{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openTestStore(t, t.TempDir(), Options{TxWrites: tt.txWrites, BatchSize: 100})
			v := build(t, s, BuildSpec{DB: "db", Version: "v1", Files: d.files(t),
				Partitions: tt.partitions, Compression: tt.comp})
			checkVersion(t, v, d)
			m := v.Manifest()
			wantHeld := []int{0, 1, 2, 3, 4}
			if tt.partitions != nil {
				wantHeld = slices.Compact(slices.Sorted(slices.Values(tt.partitions)))
			}
			if !slices.Equal(m.Partitions, wantHeld) {
				t.Errorf("partitions %v, want %v", m.Partitions, wantHeld)
			}
			for _, p := range wantHeld {
				if !v.Holds(p) {
					t.Errorf("Holds(%d) false", p)
				}
			}
			if v.Holds(-1) || v.Holds(5) {
				t.Error("Holds out of range")
			}
			if m.NumPartitions != 5 || m.Partitioner != "sequins" || m.Compression != tt.comp || len(m.Files) != 5 {
				t.Errorf("manifest %+v", m)
			}
			for _, f := range m.Files {
				if f.Records != 400 || f.Size <= 0 {
					t.Errorf("file info %+v", f)
				}
			}
			got := checksums(m)
			if sums == nil && tt.partitions == nil {
				sums = got
			}
			for p, sum := range got {
				if sums != nil && sums[p] != sum {
					t.Errorf("partition %d checksum %s, want %s", p, sum, sums[p])
				}
			}
		})
	}
}

// The directly laid-out files are valid for bbolt's own checker.
func TestBuildFilesPassBboltCheck(t *testing.T) {
	d := makeDataset(t, datasetOpts{files: 3, perFile: 3000, repetitive: true, seed: 2})
	for _, comp := range []Compression{CompressionNone, CompressionZstd} {
		t.Run(string(comp), func(t *testing.T) {
			s := openTestStore(t, t.TempDir(), Options{})
			v := build(t, s, BuildSpec{DB: "db", Version: "v1", Files: d.files(t), Compression: comp})
			for _, p := range v.Manifest().Partitions {
				db := v.contents.Load().parts[p].db
				err := db.View(func(tx *bolt.Tx) error {
					for err := range tx.Check() {
						return err
					}
					if dict := tx.Bucket(metaBucket).Get([]byte(metaZstdDict)); (dict != nil) != (comp == CompressionZstd) {
						t.Errorf("partition %d: zstd dictionary of %d bytes", p, len(dict))
					}
					return nil
				})
				if err != nil {
					t.Errorf("partition %d: %v", p, err)
				}
			}
		})
	}
}

func TestCompressionShrinksSmallValues(t *testing.T) {
	d := makeDataset(t, datasetOpts{files: 2, perFile: 3000, repetitive: true, seed: 3})
	stored := map[Compression]int64{}
	for _, comp := range []Compression{CompressionNone, CompressionS2, CompressionZstd} {
		s := openTestStore(t, t.TempDir(), Options{})
		v := build(t, s, BuildSpec{DB: "db", Version: "v1", Files: d.files(t), Compression: comp})
		checkVersion(t, v, d)
		stored[comp] = v.Manifest().StoredBytes
	}
	t.Logf("stored bytes: %v", stored)
	for _, comp := range []Compression{CompressionS2, CompressionZstd} {
		if stored[comp] >= stored[CompressionNone]*85/100 {
			t.Errorf("%s: %d bytes, none: %d: not 15%% smaller", comp, stored[comp], stored[CompressionNone])
		}
	}
}

// Too few values to train a dictionary: zstd stores raw, s2 plain.
func TestCompressionWithoutDictionary(t *testing.T) {
	d := makeDataset(t, datasetOpts{files: 2, perFile: 5, repetitive: true, seed: 4})
	for _, comp := range []Compression{CompressionS2, CompressionZstd} {
		s := openTestStore(t, t.TempDir(), Options{})
		v := build(t, s, BuildSpec{DB: "db", Version: "v1", Files: d.files(t), Compression: comp})
		checkVersion(t, v, d)
	}
}

func TestSpillMatchesInMemory(t *testing.T) {
	d := makeDataset(t, datasetOpts{files: 4, perFile: 3000, dupEvery: 5, seed: 5})
	var want map[int]string
	for _, tt := range []struct {
		name   string
		budget int64
		comp   Compression
		spills bool
	}{
		{"in memory", 0, CompressionNone, false},
		{"spilled", 64 << 10, CompressionNone, true},
		{"spilled zstd", 64 << 10, CompressionZstd, true},
		{"spilled s2", 200 << 10, CompressionS2, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			logs := &logCounter{}
			s := openTestStore(t, t.TempDir(), Options{MemoryBudget: tt.budget, Logger: slog.New(logs)})
			v := build(t, s, BuildSpec{DB: "db", Version: "v1", Files: d.files(t), Compression: tt.comp})
			checkVersion(t, v, d)
			if n := logs.count("spilled"); (n > 0) != tt.spills {
				t.Errorf("%d spills", n)
			}
			if want == nil {
				want = checksums(v.Manifest())
			} else if got := checksums(v.Manifest()); !maps.Equal(got, want) {
				t.Errorf("checksums %v, want %v", got, want)
			}
			entries, _ := os.ReadDir(filepath.Join(s.Dir(), "dbs", "db", "v1"))
			for _, e := range entries {
				if filepath.Ext(e.Name()) == tmpSuffix {
					t.Errorf("left %s", e.Name())
				}
			}
		})
	}
}

// Duplicates: the last record read wins, files in order, records in file
// order, whatever the parallelism and spilling.
func TestDuplicatesLastWins(t *testing.T) {
	dir := t.TempDir()
	key := func(s string) []byte { return []byte(s) }
	files := [][]record{
		{{key("a"), []byte("0.0")}, {key("b"), []byte("0.1")}, {key("a"), []byte("0.2")}, {key("c"), []byte("0.3")}},
		{{key("b"), []byte("1.0")}, {key("d"), []byte("1.1")}},
		{{key("a"), []byte("2.0")}, {key("d"), []byte("2.1")}, {key("d"), []byte("2.2")}},
		{{key("e"), []byte("3.0")}},
	}
	// Padding records so that tiny budgets spill between duplicates.
	for i := range files {
		for j := range 300 {
			files[i] = append(files[i], record{[]byte{byte(i), byte(j >> 8), byte(j), 'p'}, make([]byte, 100)})
		}
		files[i] = append(files[i], record{key("z"), []byte{byte('0' + i)}})
	}
	var names []string
	for i, recs := range files {
		names = append(names, "f"+string(rune('0'+i)))
		writeSeqFile(t, filepath.Join(dir, names[i]), recs)
	}
	want := map[string]string{"a": "2.0", "b": "1.0", "c": "0.3", "d": "2.2", "e": "3.0", "z": "3"}
	var sums map[int]string
	for _, tt := range []struct {
		name  string
		opts  Options
		parts []int
		part  Partitioner
	}{
		{"serial", Options{MaxParallelLoads: 1}, nil, nil},
		{"parallel", Options{MaxParallelLoads: 4}, nil, nil},
		{"spilled", Options{MaxParallelLoads: 4, MemoryBudget: 8 << 10}, nil, nil},
		{"spilled serial", Options{MaxParallelLoads: 1, MemoryBudget: 4 << 10}, nil, nil},
		{"tx", Options{MaxParallelLoads: 3, TxWrites: true}, nil, nil},
		{"batched partitioner", Options{MaxParallelLoads: 4}, nil, &batchedPartitioner{}},
		{"batched partitioner spilled", Options{MaxParallelLoads: 2, MemoryBudget: 8 << 10}, nil, &batchedPartitioner{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for range 3 {
				s := openTestStore(t, t.TempDir(), tt.opts)
				v := build(t, s, BuildSpec{DB: "db", Version: "v1", Files: sourceFiles(t, dir, names), Partitioner: tt.part})
				if bp, ok := tt.part.(*batchedPartitioner); ok && bp.calls.Load() == 0 {
					t.Fatal("the batch export was not used")
				}
				for k, w := range want {
					p, _, _ := (sequinsPartitioner{}).Partition([]byte(k), len(files))
					got, err := v.Get(p, []byte(k))
					if err != nil || string(got) != w {
						t.Errorf("Get(%q) = %q, %v; want %q", k, got, err, w)
					}
				}
				if sums == nil {
					sums = checksums(v.Manifest())
				} else if got := checksums(v.Manifest()); !maps.Equal(got, sums) {
					t.Errorf("checksums differ: %v, %v", got, sums)
				}
				v.Close()
				s.Close()
			}
		})
	}
}

func TestCorruptFileFails(t *testing.T) {
	d := makeDataset(t, datasetOpts{files: 3, perFile: 500, seed: 6})
	path := filepath.Join(d.dir, d.names[1])
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		mangle func([]byte) []byte
	}{
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }},
		{"key longer than record", func(b []byte) []byte {
			// A record of 5 bytes whose key claims 10.
			return append(slices.Clone(b), 0, 0, 0, 5, 0, 0, 0, 10, 1, 2, 3, 4, 5)
		}},
		{"not a sequencefile", func(b []byte) []byte { return []byte("hello, world") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(path, tt.mangle(b), 0o644); err != nil {
				t.Fatal(err)
			}
			s := openTestStore(t, t.TempDir(), Options{})
			// A previous version must survive the failure.
			prev := makeDataset(t, datasetOpts{files: 1, perFile: 10, seed: 7})
			build(t, s, BuildSpec{DB: "db", Version: "v0", Files: prev.files(t)})
			_, err := s.Build(context.Background(), BuildSpec{DB: "db", Version: "v1", Files: d.files(t),
				Partitioner: sequinsPartitioner{}})
			var serr *seqfile.Error
			if tt.name == "not a sequencefile" { // no format's magic
				if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), d.names[1]) {
					t.Fatalf("err = %v, want ErrBadInput naming %s", err, d.names[1])
				}
			} else if !errors.As(err, &serr) {
				t.Fatalf("err = %v, want a *seqfile.Error", err)
			}
			if serr != nil && (serr.File != d.names[1] || serr.Offset <= 0) {
				t.Errorf("error names file %q offset %d", serr.File, serr.Offset)
			}
			t.Log(err)
			if _, err := os.Stat(filepath.Join(s.Dir(), "dbs", "db", "v1")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("version dir left behind: %v", err)
			}
			ms, err := s.Versions()
			if err != nil || len(ms) != 1 || ms[0].Version != "v0" {
				t.Errorf("Versions() = %v, %v", ms, err)
			}
		})
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestBuildCancelled(t *testing.T) {
	d := makeDataset(t, datasetOpts{files: 4, perFile: 2000, seed: 8})
	for _, tt := range []struct {
		name string
		opts Options
	}{
		{"in memory", Options{}},
		{"spilling", Options{MemoryBudget: 32 << 10}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := openTestStore(t, t.TempDir(), tt.opts)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			files := d.files(t)
			open := files[2].Open
			files[2].Open = func(ctx context.Context) (io.ReadCloser, error) {
				rc, err := open(ctx)
				if err != nil {
					return nil, err
				}
				cr := &cancellingReader{r: rc, cancel: cancel}
				cr.left.Store(files[2].Size / 2)
				return cr, nil
			}
			_, err := s.Build(ctx, BuildSpec{DB: "db", Version: "v1", Files: files, Partitioner: sequinsPartitioner{}})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			if _, err := os.Stat(filepath.Join(s.Dir(), "dbs", "db", "v1")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("version dir left behind: %v", err)
			}
			// The same version builds afterwards.
			v := build(t, s, BuildSpec{DB: "db", Version: "v1", Files: d.files(t)})
			checkVersion(t, v, d)
		})
	}
}

func TestBuildBadInput(t *testing.T) {
	dir := t.TempDir()
	writeSeqFile(t, filepath.Join(dir, "a"), []record{{[]byte("k1"), []byte("v")}, {[]byte("k2"), []byte("v")}})
	writeSeqFile(t, filepath.Join(dir, "b"), []record{{[]byte("k3"), []byte("v")}, {nil, []byte("empty key")}})
	writeSeqFile(t, filepath.Join(dir, "c"), []record{{make([]byte, maxKeySize+1), []byte("v")}})
	tests := []struct {
		name  string
		files []string
		part  Partitioner
		want  error
	}{
		{"empty key", []string{"a", "b"}, sequinsPartitioner{}, ErrBadInput},
		{"huge key", []string{"a", "c"}, sequinsPartitioner{}, ErrBadInput},
		{"partitioner error", []string{"a", "b"}, failingPartitioner{bad: "k2"}, nil},
		{"partition out of range", []string{"a"}, badRangePartitioner{}, ErrBadInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openTestStore(t, t.TempDir(), Options{})
			_, err := s.Build(context.Background(), BuildSpec{DB: "db", Version: "v1",
				Files: sourceFiles(t, dir, tt.files), Partitioner: tt.part})
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			t.Log(err)
			if ms, _ := s.Versions(); len(ms) != 0 {
				t.Errorf("versions %v", ms)
			}
		})
	}
}

type badRangePartitioner struct{}

func (badRangePartitioner) Partition([]byte, int) (int, int, error) { return 7, 7, nil }

func TestBuildSpecErrors(t *testing.T) {
	s := openTestStore(t, t.TempDir(), Options{})
	d := makeDataset(t, datasetOpts{files: 2, perFile: 10, seed: 9})
	good := BuildSpec{DB: "db", Version: "v1", Files: d.files(t), Partitioner: sequinsPartitioner{}}
	tests := []struct {
		name string
		edit func(*BuildSpec)
		want error
	}{
		{"bad db", func(s *BuildSpec) { s.DB = "../x" }, ErrInvalidName},
		{"bad version", func(s *BuildSpec) { s.Version = "" }, ErrInvalidName},
		{"no partitioner", func(s *BuildSpec) { s.Partitioner = nil }, ErrInvalidSpec},
		{"partition out of range", func(s *BuildSpec) { s.Partitions = []int{2} }, ErrInvalidSpec},
		{"bad compression", func(s *BuildSpec) { s.Compression = "lzma" }, ErrInvalidSpec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := good
			tt.edit(&spec)
			if _, err := s.Build(context.Background(), spec); !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
	v := build(t, s, good)
	if _, err := s.Build(context.Background(), good); !errors.Is(err, ErrExists) {
		t.Errorf("second build: %v, want ErrExists", err)
	}
	v.Close()
}

func TestBuildNoFiles(t *testing.T) {
	s := openTestStore(t, t.TempDir(), Options{})
	v := build(t, s, BuildSpec{DB: "db", Version: "v1"})
	if m := v.Manifest(); m.NumPartitions != 0 || len(m.Partitions) != 0 || m.Records != 0 {
		t.Errorf("manifest %+v", m)
	}
	if _, err := v.Get(0, []byte("k")); !errors.Is(err, ErrPartitionNotHeld) {
		t.Errorf("Get: %v", err)
	}
}

func TestBuildProgress(t *testing.T) {
	d := makeDataset(t, datasetOpts{files: 3, perFile: 5000, seed: 10})
	s := openTestStore(t, t.TempDir(), Options{})
	var last BuildProgress
	calls := 0
	build(t, s, BuildSpec{DB: "db", Version: "v1", Files: d.files(t), Progress: func(p BuildProgress) {
		last = p
		calls++
	}})
	var size int64
	for _, f := range d.files(t) {
		size += f.Size
	}
	want := BuildProgress{FilesDone: 3, FilesTotal: 3, BytesRead: size, BytesTotal: size, Records: 15000}
	if calls == 0 || last != want {
		t.Errorf("last progress %+v after %d calls, want %+v", last, calls, want)
	}
}

func TestParseCompression(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Compression
		ok   bool
	}{
		{"", CompressionNone, true}, {"none", CompressionNone, true}, {"s2", CompressionS2, true},
		{"snappy", CompressionS2Blocks, true}, {"S2-Blocks", CompressionS2Blocks, true}, {"ZSTD", CompressionZstd, true}, {"gzip", "", false},
	} {
		got, err := ParseCompression(tt.in)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("ParseCompression(%q) = %q, %v", tt.in, got, err)
		}
	}
}

// TestSharedKeyPrefix sorts keys that share a long prefix (the sort indexes
// the bytes after it), including the bare prefix and keys one byte longer.
func TestSharedKeyPrefix(t *testing.T) {
	dir := t.TempDir()
	const prefix = "tenant-0000000000:"
	want := map[string]string{}
	var recs []record
	add := func(k string) {
		v := fmt.Sprintf("v%d", len(recs))
		recs = append(recs, record{[]byte(k), []byte(v)})
		want[k] = v
	}
	add(prefix)
	add(prefix + "\x00")
	add(prefix + "\xff")
	add(prefix + "a")
	for i := range 5000 {
		add(fmt.Sprintf("%s%016x", prefix, (i*7919)%5000))
	}
	writeSeqFile(t, filepath.Join(dir, "part-00000"), recs)
	s := openTestStore(t, t.TempDir(), Options{})
	v := build(t, s, BuildSpec{DB: "db", Version: "v1", Files: sourceFiles(t, dir, []string{"part-00000"})})
	for k, w := range want {
		got, err := v.Get(0, []byte(k))
		if err != nil || string(got) != w {
			t.Fatalf("Get(%q) = %q, %v; want %q", k, got, err, w)
		}
	}
	// In key order, as bbolt's checker and a cursor see it.
	err := v.contents.Load().parts[0].db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		var prev []byte
		n := 0
		c := tx.Bucket(dataBucket).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if prev != nil && bytes.Compare(prev, k) >= 0 {
				t.Errorf("keys out of order: %q then %q", prev, k)
			}
			prev = append(prev[:0], k...)
			n++
		}
		if n != len(want) {
			t.Errorf("%d keys, want %d", n, len(want))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
