package blocks

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/spangledb/spangle/blocks/seqfile"
)

// sequinsPartitioner is sequins' partitioner (SEQUINS.md §4), a test fake
// for plugins' real one.
type sequinsPartitioner struct{}

func sequinsHash(key []byte) int32 {
	var h int32
	for _, b := range key {
		h = 31*h + int32(b)
	}
	return h
}

func (sequinsPartitioner) Partition(key []byte, n int) (int, int, error) {
	hc := sequinsHash(key)
	p := int(hc&0x7fffffff) % n
	alt := p
	if hc > 0x7fffffff-32 {
		t := int((hc+31)&0x7fffffff) % n
		alt = (t + (n - (31 % n))) % n
	}
	return p, alt, nil
}

// batchedPartitioner is sequins' partitioner with a batch form, as a Wasm
// module with a batch export has. Partition fails: builds must batch.
type batchedPartitioner struct{ calls atomic.Int64 }

func (*batchedPartitioner) Partition([]byte, int) (int, int, error) {
	return 0, 0, errors.New("batchedPartitioner: Partition called")
}

func (*batchedPartitioner) Batched() bool { return true }

func (b *batchedPartitioner) PartitionBatch(keys [][]byte, n int, out []int) error {
	b.calls.Add(1)
	for i, k := range keys {
		out[i], _, _ = sequinsPartitioner{}.Partition(k, n)
	}
	return nil
}

// failingPartitioner fails on one key.
type failingPartitioner struct{ bad string }

func (f failingPartitioner) Partition(key []byte, n int) (int, int, error) {
	if string(key) == f.bad {
		return 0, 0, errors.New("plugin trapped")
	}
	return sequinsPartitioner{}.Partition(key, n)
}

type record struct{ k, v []byte }

// writeSeqFile writes records to path as an uncompressed SequenceFile of
// BytesWritable.
func writeSeqFile(t testing.TB, path string, recs []record) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	w, err := seqfile.NewWriter(bw, seqfile.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Append(r.k, r.v); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// sourceFiles returns SourceFiles for the named files in dir. opened, if
// not nil, counts Open calls per file.
func sourceFiles(t testing.TB, dir string, names []string) []SourceFile {
	t.Helper()
	files := make([]SourceFile, len(names))
	for i, n := range names {
		path := filepath.Join(dir, n)
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		files[i] = SourceFile{Name: n, Size: fi.Size(), Open: func(context.Context) (io.ReadCloser, error) {
			return os.Open(path)
		}}
	}
	return files
}

// dataset is source files and the content a build of them must have.
type dataset struct {
	dir   string
	names []string
	want  map[string][]byte // key → value, last one wins
	n     int
}

func (d *dataset) files(t testing.TB) []SourceFile { return sourceFiles(t, d.dir, d.names) }

type datasetOpts struct {
	files, perFile int
	keyLen         int  // 0: 16
	dupEvery       int  // every dupEvery-th record reuses an earlier key (0: none)
	repetitive     bool // JSON-like compressible values instead of random bytes
	seed           uint64
	// write writes a file's records; nil: writeSeqFile.
	write func(t testing.TB, path string, recs []record)
}

// makeDataset writes o.files files (SequenceFiles unless o.write says)
// of o.perFile records each.
// Values name their file and record, so that the winner of a duplicate is
// visible.
func makeDataset(t testing.TB, o datasetOpts) *dataset {
	t.Helper()
	if o.keyLen == 0 {
		o.keyLen = 16
	}
	r := rand.New(rand.NewPCG(o.seed, 7))
	d := &dataset{dir: t.TempDir(), want: map[string][]byte{}, n: o.files}
	var keys [][]byte
	for f := range o.files {
		name := fmt.Sprintf("part-%05d", f)
		d.names = append(d.names, name)
		recs := make([]record, o.perFile)
		for i := range recs {
			var k []byte
			if o.dupEvery > 0 && len(keys) > 0 && i%o.dupEvery == o.dupEvery-1 {
				k = keys[r.IntN(len(keys))]
			} else {
				k = make([]byte, o.keyLen)
				for j := range k {
					k[j] = byte(r.Uint32())
				}
				keys = append(keys, k)
			}
			var v []byte
			if o.repetitive {
				id := r.IntN(1e8)
				v = fmt.Appendf(nil, `{"id":%d,"name":"user-%d","file":%d,"rec":%d,"city":"%s","score":%d}`,
					id, id, f, i, []string{"berlin", "paris", "tokyo", "lima"}[r.IntN(4)], r.IntN(1000))
			} else {
				v = make([]byte, 90+r.IntN(21))
				for j := range v {
					v[j] = byte(r.Uint32())
				}
				binary.BigEndian.PutUint32(v, uint32(f))
				binary.BigEndian.PutUint32(v[4:], uint32(i))
			}
			recs[i] = record{k, v}
			d.want[string(k)] = v
		}
		write := o.write
		if write == nil {
			write = writeSeqFile
		}
		write(t, filepath.Join(d.dir, name), recs)
	}
	return d
}

func openTestStore(t testing.TB, dir string, opts Options) *Store {
	t.Helper()
	s, err := OpenStore(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func build(t testing.TB, s *Store, spec BuildSpec) *Version {
	t.Helper()
	if spec.Partitioner == nil {
		spec.Partitioner = sequinsPartitioner{}
		spec.PartitionerID = "sequins"
	}
	v, err := s.Build(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

// checkVersion checks that v holds exactly the expected content of its
// partitions.
func checkVersion(t testing.TB, v *Version, d *dataset) {
	t.Helper()
	m := v.Manifest()
	held := map[int]bool{}
	for _, p := range m.Partitions {
		held[p] = true
	}
	var records int64
	for k, want := range d.want {
		p, _, _ := (sequinsPartitioner{}).Partition([]byte(k), d.n)
		got, err := v.Get(p, []byte(k))
		if !held[p] {
			if !errors.Is(err, ErrPartitionNotHeld) {
				t.Fatalf("Get(%d, %x) of a partition not held: %v", p, k, err)
			}
			continue
		}
		records++
		if err != nil {
			t.Fatalf("Get(%d, %x): %v", p, k, err)
		}
		if string(got) != string(want) {
			t.Fatalf("Get(%d, %x) = %x, want %x", p, k, got, want)
		}
	}
	if m.Records != records {
		t.Errorf("manifest records %d, want %d", m.Records, records)
	}
	for _, p := range m.Partitions {
		missing := []byte("no such key, none at all")
		if _, err := v.Get(p, missing); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%d, missing) = %v, want ErrNotFound", p, err)
		}
	}
}

// checksums returns the partitions' checksums.
func checksums(m *Manifest) map[int]string {
	out := map[int]string{}
	for _, pi := range m.PartitionInfo {
		out[pi.Partition] = pi.Checksum
	}
	return out
}

// logCounter counts log messages containing a string.
type logCounter struct {
	mu   sync.Mutex
	msgs []string
}

func (c *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *logCounter) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	c.msgs = append(c.msgs, r.Message)
	c.mu.Unlock()
	return nil
}
func (c *logCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *logCounter) WithGroup(string) slog.Handler      { return c }

func (c *logCounter) count(substr string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, m := range c.msgs {
		if strings.Contains(m, substr) {
			n++
		}
	}
	return n
}

// cancellingReader cancels a context once n bytes have been read.
type cancellingReader struct {
	r      io.ReadCloser
	left   atomic.Int64
	cancel context.CancelFunc
}

func (c *cancellingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.left.Add(-int64(n)) <= 0 {
		c.cancel()
	}
	return n, err
}

func (c *cancellingReader) Close() error { return c.r.Close() }
