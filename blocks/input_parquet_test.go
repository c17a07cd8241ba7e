package blocks

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"

	"github.com/spangledb/spangle/blocks/parquetin"
	"github.com/spangledb/spangle/blocks/seqfile"
)

type kvRow struct {
	Key   []byte `parquet:"key"`
	Value []byte `parquet:"value"`
}

type kvDictRow struct {
	Key   string `parquet:"key"`
	Value []byte `parquet:"value,dict"`
}

// parquetWriter returns a dataset writer of Parquet files with codec,
// dictionary-encoded values (and string keys) if dict, and row groups of
// at most rowGroup rows.
func parquetWriter(codec compress.Codec, dict bool, rowGroup int64) func(testing.TB, string, []record) {
	return func(t testing.TB, path string, recs []record) {
		t.Helper()
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		opts := []parquet.WriterOption{parquet.Compression(codec), parquet.MaxRowsPerRowGroup(rowGroup), parquet.PageBufferSize(8 << 10)}
		if dict {
			w := parquet.NewGenericWriter[kvDictRow](f, opts...)
			for _, r := range recs {
				if _, err := w.Write([]kvDictRow{{string(r.k), r.v}}); err != nil {
					t.Fatal(err)
				}
			}
			err = w.Close()
		} else {
			w := parquet.NewGenericWriter[kvRow](f, opts...)
			for _, r := range recs {
				if _, err := w.Write([]kvRow{{r.k, r.v}}); err != nil {
					t.Fatal(err)
				}
			}
			err = w.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// streamed hides the *os.File behind Open, as remote sources do: the
// build spools the file.
func streamed(files []SourceFile) []SourceFile {
	for i := range files {
		open := files[i].Open
		files[i].Open = func(ctx context.Context) (io.ReadCloser, error) {
			rc, err := open(ctx)
			if err != nil {
				return nil, err
			}
			return struct {
				io.Reader
				io.Closer
			}{rc, rc}, nil
		}
	}
	return files
}

// TestBuildParquet builds versions from Parquet files of every codec, with
// plain and dictionary encodings, several row groups, read in place and
// spooled, detected by their magic bytes. LZ4_RAW is read from files of
// other writers (parquetin's tests): parquet-go's writer stores a page of
// random bytes as an empty LZ4 block.
func TestBuildParquet(t *testing.T) {
	codecs := []compress.Codec{&parquet.Uncompressed, &parquet.Snappy, &parquet.Gzip, &parquet.Zstd}
	for i, codec := range codecs {
		for _, dict := range []bool{false, true} {
			name := codec.String()
			if dict {
				name += "/dict"
			}
			t.Run(name, func(t *testing.T) {
				d := makeDataset(t, datasetOpts{files: 3, perFile: 700, dupEvery: 9, seed: uint64(10 + i),
					write: parquetWriter(codec, dict, 250)})
				s := openTestStore(t, t.TempDir(), Options{})
				files := d.files(t)
				if dict {
					files = streamed(files)
				}
				v := build(t, s, BuildSpec{DB: "db", Version: "v1", Files: files, Compression: CompressionS2Blocks})
				checkVersion(t, v, d)
				if entries, _ := os.ReadDir(filepath.Join(s.Dir(), "dbs", "db", "v1")); len(entries) == 0 {
					t.Fatal("empty version dir")
				} else {
					for _, e := range entries {
						if strings.HasPrefix(e.Name(), ".spool") {
							t.Errorf("spool file %s left behind", e.Name())
						}
					}
				}
			})
		}
	}
}

// TestBuildParquetColumns reads the key and value from columns named per
// db, and forced formats refuse other files.
func TestBuildParquetColumns(t *testing.T) {
	type row struct {
		ID   string `parquet:"id"`
		Body []byte `parquet:"body"`
		N    int64  `parquet:"n"`
	}
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "part-00000.snappy.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[row](f, parquet.Compression(&parquet.Snappy))
	if _, err := w.Write([]row{{"a", []byte("1"), 7}, {"b", []byte("2"), 8}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	files := sourceFiles(t, dir, []string{"part-00000.snappy.parquet"})
	s := openTestStore(t, t.TempDir(), Options{})
	v := build(t, s, BuildSpec{DB: "db", Version: "v1", Files: files, KeyField: "id", ValueField: "n", Format: FormatParquet})
	if got, err := v.Get(0, []byte("b")); err != nil || string(got) != "\x00\x00\x00\x00\x00\x00\x00\x08" {
		t.Fatalf("Get(b) = %q, %v", got, err)
	}
	_, err = s.Build(context.Background(), BuildSpec{DB: "db", Version: "v2", Files: files, Partitioner: sequinsPartitioner{}})
	var perr *parquetin.Error
	if !errors.As(err, &perr) || perr.File != "part-00000.snappy.parquet" || !strings.Contains(err.Error(), `no key column "key"`) {
		t.Fatalf("default columns: err = %v", err)
	}
	_, err = s.Build(context.Background(), BuildSpec{DB: "db", Version: "v3", Files: files, Partitioner: sequinsPartitioner{},
		Format: FormatSequenceFile})
	if err == nil || !strings.Contains(err.Error(), "part-00000.snappy.parquet") {
		t.Fatalf("forced sequencefile: err = %v", err)
	}
	if _, err := ParseFormat("orc"); !errors.Is(err, ErrInvalidSpec) {
		t.Fatalf("ParseFormat(orc) = %v", err)
	}
}

// TestParquetTailChecked: a streamed file that starts as Parquet but does
// not end as one is refused from its last bytes, before it is copied.
func TestParquetTailChecked(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "part-00000.parquet")
	b := make([]byte, 8<<20)
	copy(b, parquetin.Magic)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var read atomic.Int64
	files := sourceFiles(t, dir, []string{"part-00000.parquet"})
	files[0].Open = func(context.Context) (io.ReadCloser, error) {
		f, err := os.Open(path)
		return struct {
			io.Reader
			io.Closer
		}{&countingReader{r: f, n: &read}, f}, err
	}
	files[0].OpenAt = func(_ context.Context, off int64) (io.ReadCloser, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		_, err = f.Seek(off, io.SeekStart)
		return struct {
			io.Reader
			io.Closer
		}{f, f}, err
	}
	s := openTestStore(t, t.TempDir(), Options{})
	_, err := s.Build(context.Background(), BuildSpec{DB: "db", Version: "v1", Files: files, Partitioner: sequinsPartitioner{}})
	var perr *parquetin.Error
	if !errors.As(err, &perr) || !strings.Contains(err.Error(), "invalid magic footer") {
		t.Fatalf("err = %v, want the footer refused", err)
	}
	if n := read.Load(); n > inputBuffer {
		t.Fatalf("%d bytes read: the file was copied before its end was checked", n)
	}
}

// TestPreshardedParquet: presharded input works as for SequenceFiles when
// the files are Parquet.
func TestPreshardedParquet(t *testing.T) {
	d := preshardedDataset(t, 20, 9, 50, nil)
	for _, name := range d.names {
		path := filepath.Join(d.dir, name)
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		r, err := seqfile.NewReader(f, name)
		if err != nil {
			t.Fatal(err)
		}
		var recs []record
		for r.Next() {
			recs = append(recs, record{bytes.Clone(r.Key()), bytes.Clone(r.Value())})
		}
		f.Close()
		if r.Err() != nil {
			t.Fatal(r.Err())
		}
		parquetWriter(&parquet.Snappy, false, 20)(t, path, recs)
	}
	s := openTestStore(t, t.TempDir(), Options{})
	v := build(t, s, BuildSpec{DB: "db", Version: "v1", Files: d.files(t), Presharded: true, Partitions: []int{11, 0, 19}})
	if got, err := v.Get(11, pathological); err != nil || string(got) != "pathological" { // in its alternate's file
		t.Errorf("Get(11, pathological) = %q, %v", got, err)
	}
	checked := 0
	for k, want := range d.want {
		p, _, _ := sequinsPartitioner{}.Partition([]byte(k), 20)
		if k == string(pathological) || !v.Holds(p) {
			continue
		}
		checked++
		if got, err := v.Get(p, []byte(k)); err != nil || string(got) != string(want) {
			t.Fatalf("Get(%d, %x) = %q, %v", p, k, got, err)
		}
	}
	if checked != 150 {
		t.Fatalf("%d keys checked, want 150", checked)
	}
}

// TestParquetPagesBounded: a file whose value pages take 2 MiB (two values
// of 1 MiB, snappy, 4 KB on disk) is refused, naming the file, the page
// and the budget, by a build whose budget gives each of its four loads
// pages of 1 MiB, and built under the default budget (pages of 8 MiB).
// Without the bound the library decoded such pages whatever the budget
// (up to parquetin.MaxPageSize, 256 MiB).
func TestParquetPagesBounded(t *testing.T) {
	dir := t.TempDir()
	big := bytes.Repeat([]byte("v"), 1<<20)
	f, err := os.Create(filepath.Join(dir, "part-00000.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[kvRow](f, parquet.Compression(&parquet.Snappy), parquet.PageBufferSize(4<<20))
	if _, err := w.Write([]kvRow{{[]byte("a"), big}, {[]byte("b"), big}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	files := sourceFiles(t, dir, []string{"part-00000.parquet"})
	small := openTestStore(t, t.TempDir(), Options{MemoryBudget: 16 << 20, MaxParallelLoads: 4})
	_, err = small.Build(context.Background(), BuildSpec{DB: "db", Version: "v1", Files: files, Partitioner: sequinsPartitioner{}})
	if !errors.Is(err, parquetin.ErrFormat) || !strings.Contains(err.Error(), "part-00000.parquet") ||
		!strings.Contains(err.Error(), "memory budget") {
		t.Fatalf("build under a 16 MiB budget: %v; want parquetin.ErrFormat naming the file and the memory budget", err)
	}
	v := build(t, openTestStore(t, t.TempDir(), Options{}), BuildSpec{DB: "db", Version: "v1", Files: files, Partitioner: sequinsPartitioner{}})
	if got, err := v.Get(0, []byte("b")); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("Get(b): %d bytes, %v", len(got), err)
	}
}
