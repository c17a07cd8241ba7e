package blocks

import (
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestAddPartitionsUnderLoad adds partitions to a version in three steps
// while readers hammer it: a reader sees a partition either not held or
// complete and correct, never anything else, and once it has seen one it
// keeps seeing it. The result equals a full build, and survives a restart.
func TestAddPartitionsUnderLoad(t *testing.T) {
	d := makeDataset(t, datasetOpts{files: 5, perFile: 400, repetitive: true, seed: 31})
	keys := slices.Collect(maps.Keys(d.want))
	for _, comp := range []Compression{CompressionNone, CompressionS2, CompressionZstd, CompressionS2Blocks} {
		t.Run(string(comp), func(t *testing.T) {
			dir := t.TempDir()
			s := openTestStore(t, dir, Options{})
			spec := BuildSpec{DB: "db", Version: "v1", Files: d.files(t), Partitioner: sequinsPartitioner{},
				PartitionerID: "sequins", Compression: comp, Partitions: []int{0, 2}}
			v := build(t, s, spec)

			var wg sync.WaitGroup
			quit := make(chan struct{})
			var reads atomic.Int64
			for g := range 4 {
				wg.Go(func() {
					seen := make([]bool, d.n)
					var buf []byte
					for i := g; ; i++ {
						select {
						case <-quit:
							return
						default:
						}
						k := []byte(keys[i%len(keys)])
						p, _, _ := (sequinsPartitioner{}).Partition(k, d.n)
						var err error
						buf, err = v.GetAppend(buf[:0], p, k)
						switch {
						case errors.Is(err, ErrPartitionNotHeld):
							if seen[p] {
								t.Errorf("partition %d held, then not", p)
								return
							}
						case err != nil || string(buf) != string(d.want[string(k)]):
							t.Errorf("Get(%d, %x) = %q, %v", p, k, buf, err)
							return
						default:
							seen[p] = true
						}
						reads.Add(1)
					}
				})
			}
			for _, add := range [][]int{{1}, {3, 1, 0}, nil} {
				before := reads.Load()
				spec.Partitions = add
				if err := s.AddPartitions(context.Background(), v, spec); err != nil {
					t.Fatal(err)
				}
				waitReads(t, &reads, before+100) // the readers run between the adds too
			}
			close(quit)
			wg.Wait()

			m := v.Manifest()
			if !slices.Equal(m.Partitions, []int{0, 1, 2, 3, 4}) || m.AddedAt.IsZero() {
				t.Fatalf("manifest partitions %v, added at %v", m.Partitions, m.AddedAt)
			}
			checkVersion(t, v, d)
			full := build(t, openTestStore(t, t.TempDir(), Options{}), BuildSpec{DB: "db", Version: "v1",
				Files: d.files(t), Compression: comp})
			if got, want := checksums(m), checksums(full.Manifest()); !maps.Equal(got, want) {
				t.Errorf("checksums %v, a full build has %v", got, want)
			}
			if m.Records != full.Manifest().Records || m.Bytes != full.Manifest().Bytes {
				t.Errorf("records %d bytes %d, a full build has %d and %d", m.Records, m.Bytes,
					full.Manifest().Records, full.Manifest().Bytes)
			}

			// A restart reuses the added partitions.
			v.Close()
			s.Close()
			s = openTestStore(t, dir, Options{})
			v, err := s.Open("db", "v1")
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			if !slices.Equal(v.Manifest().Partitions, []int{0, 1, 2, 3, 4}) {
				t.Fatalf("reopened with partitions %v", v.Manifest().Partitions)
			}
			checkVersion(t, v, d)
		})
	}
}

// waitReads polls until n reads have been done.
func waitReads(t *testing.T, reads *atomic.Int64, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for reads.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("readers stuck at %d reads", reads.Load())
		}
		time.Sleep(time.Millisecond) // the polling interval
	}
}

// gate holds source file opens until it is opened.
type gate struct {
	waiting chan struct{} // receives one value per Open that waits
	open    chan struct{}
}

func newGate() *gate { return &gate{waiting: make(chan struct{}, 64), open: make(chan struct{})} }

func (g *gate) files(files []SourceFile) []SourceFile {
	out := slices.Clone(files)
	for i, f := range out {
		out[i].Open = func(ctx context.Context) (io.ReadCloser, error) {
			g.waiting <- struct{}{}
			select {
			case <-g.open:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return f.Open(ctx)
		}
	}
	return out
}

// TestAddPartitionsBusy: while partitions are being added, the version
// cannot be removed nor added to by another call; readers are not held up.
func TestAddPartitionsBusy(t *testing.T) {
	d := makeDataset(t, datasetOpts{files: 3, perFile: 100, seed: 32})
	s := openTestStore(t, t.TempDir(), Options{})
	spec := BuildSpec{DB: "db", Version: "v1", Files: d.files(t), Partitioner: sequinsPartitioner{},
		PartitionerID: "sequins", Partitions: []int{0}}
	v := build(t, s, spec)
	g := newGate()
	gated := spec
	gated.Files = g.files(spec.Files)
	gated.Partitions = []int{1}
	done := make(chan error, 1)
	go func() { done <- s.AddPartitions(context.Background(), v, gated) }()
	<-g.waiting // the add is reading its source
	if err := s.Remove("db", "v1"); !errors.Is(err, ErrBuilding) {
		t.Errorf("Remove during AddPartitions: %v", err)
	}
	spec.Partitions = []int{2}
	if err := s.AddPartitions(context.Background(), v, spec); !errors.Is(err, ErrBuilding) {
		t.Errorf("a second AddPartitions: %v", err)
	}
	for k, want := range d.want {
		p, _, _ := (sequinsPartitioner{}).Partition([]byte(k), d.n)
		if p == 0 {
			if got, err := v.Get(p, []byte(k)); err != nil || string(got) != string(want) {
				t.Fatalf("Get during AddPartitions: %q, %v", got, err)
			}
		}
	}
	if v.Holds(1) {
		t.Error("partition 1 held before its file is written")
	}
	close(g.open)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !v.Holds(1) || v.Holds(2) {
		t.Errorf("holds %v", v.Manifest().Partitions)
	}
}

// TestAddPartitionsFails: a failed or refused add leaves the version as it
// was, on disk and in memory, and no file behind.
func TestAddPartitionsFails(t *testing.T) {
	d := makeDataset(t, datasetOpts{files: 3, perFile: 200, seed: 33})
	dir := t.TempDir()
	s := openTestStore(t, dir, Options{})
	spec := BuildSpec{DB: "db", Version: "v1", Files: d.files(t), Partitioner: sequinsPartitioner{},
		PartitionerID: "sequins", Compression: CompressionS2, Partitions: []int{1}}
	v := build(t, s, spec)
	vdir := filepath.Join(dir, "dbs", "db", "v1")
	manifest, err := os.ReadFile(filepath.Join(vdir, manifestName))
	if err != nil {
		t.Fatal(err)
	}
	unchanged := func(t *testing.T) {
		t.Helper()
		if !slices.Equal(v.Manifest().Partitions, []int{1}) || !v.Holds(1) || v.Holds(0) {
			t.Errorf("version now holds %v", v.Manifest().Partitions)
		}
		if b, err := os.ReadFile(filepath.Join(vdir, manifestName)); err != nil || string(b) != string(manifest) {
			t.Errorf("manifest changed on disk: %v", err)
		}
		if names := dirNames(t, vdir); !slices.Equal(names, []string{manifestName, partitionFile(1)}) {
			t.Errorf("version dir holds %v", names)
		}
	}

	for _, tc := range []struct {
		name string
		edit func(*BuildSpec)
	}{
		{"another db", func(s *BuildSpec) { s.DB = "other" }},
		{"fewer files", func(s *BuildSpec) { s.Files = s.Files[:2] }},
		{"another partitioner", func(s *BuildSpec) { s.PartitionerID = "murmur3" }},
		{"another compression", func(s *BuildSpec) { s.Compression = CompressionZstd }},
		{"presharded", func(s *BuildSpec) { s.Presharded = true }},
		{"a renamed file", func(s *BuildSpec) { s.Files = slices.Clone(s.Files); s.Files[1].Name = "x" }},
		{"a resized file", func(s *BuildSpec) { s.Files = slices.Clone(s.Files); s.Files[2].Size++ }},
		{"a partition out of range", func(s *BuildSpec) { s.Partitions = []int{3} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := spec
			bad.Partitions = []int{0}
			tc.edit(&bad)
			if err := s.AddPartitions(context.Background(), v, bad); !errors.Is(err, ErrInvalidSpec) {
				t.Errorf("AddPartitions = %v, want ErrInvalidSpec", err)
			}
			unchanged(t)
		})
	}

	t.Run("nothing to add", func(t *testing.T) {
		if err := s.AddPartitions(context.Background(), v, spec); err != nil {
			t.Errorf("adding a held partition: %v", err)
		}
		unchanged(t)
	})
	t.Run("cancelled mid-read", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cut := spec
		cut.Partitions = []int{0, 2}
		cut.Files = slices.Clone(spec.Files)
		for i, f := range cut.Files {
			cut.Files[i].Open = func(ctx2 context.Context) (io.ReadCloser, error) {
				rc, err := f.Open(ctx2)
				if err != nil {
					return nil, err
				}
				cr := &cancellingReader{r: rc, cancel: cancel}
				cr.left.Store(f.Size / 2)
				return cr, nil
			}
		}
		if err := s.AddPartitions(ctx, v, cut); !errors.Is(err, context.Canceled) {
			t.Errorf("AddPartitions = %v, want context.Canceled", err)
		}
		unchanged(t)
		checkVersion(t, v, d)
	})
	t.Run("corrupt input", func(t *testing.T) {
		bad := spec
		bad.Partitions = []int{0}
		bad.Files = slices.Clone(spec.Files)
		bad.Files[0].Open = func(context.Context) (io.ReadCloser, error) {
			return io.NopCloser(io.LimitReader(zeroes{}, d.files(t)[0].Size)), nil
		}
		if err := s.AddPartitions(context.Background(), v, bad); err == nil {
			t.Error("AddPartitions of corrupt input succeeded")
		}
		unchanged(t)
	})
	t.Run("closed version", func(t *testing.T) {
		other, err := s.Open("db", "v1")
		if err != nil {
			t.Fatal(err)
		}
		other.Close()
		more := spec
		more.Partitions = []int{0}
		if err := s.AddPartitions(context.Background(), other, more); !errors.Is(err, ErrClosed) {
			t.Errorf("AddPartitions to a closed version: %v", err)
		}
		unchanged(t)
	})
	t.Run("stale version", func(t *testing.T) {
		// Two Versions of one directory: adding through one makes the
		// other's view of the manifest stale; adding through it must not
		// write a manifest that forgets partitions.
		other, err := s.Open("db", "v1")
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		more := spec
		more.Partitions = []int{0}
		if err := s.AddPartitions(context.Background(), other, more); err != nil {
			t.Fatal(err)
		}
		more.Partitions = []int{2}
		if err := s.AddPartitions(context.Background(), v, more); !errors.Is(err, ErrInvalidSpec) {
			t.Errorf("AddPartitions through a stale Version: %v", err)
		}
		if m, err := readManifest(vdir, "db", "v1"); err != nil || !slices.Equal(m.Partitions, []int{0, 1}) {
			t.Errorf("manifest on disk: %v, %v", m, err)
		}
	})
}

// dirNames returns the names in dir, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// zeroes reads zero bytes forever: not a SequenceFile.
type zeroes struct{}

func (zeroes) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestAddPartitionsCrash: what an AddPartitions interrupted by a crash
// leaves (a half-written partition file, a complete one the manifest does
// not list, a spill file) is removed when the store opens, the version
// opens as it was, and the partitions can be added again.
func TestAddPartitionsCrash(t *testing.T) {
	d := makeDataset(t, datasetOpts{files: 3, perFile: 200, seed: 34})
	dir := t.TempDir()
	s, err := OpenStore(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	spec := BuildSpec{DB: "db", Version: "v1", Files: d.files(t), Partitioner: sequinsPartitioner{},
		PartitionerID: "sequins", Partitions: []int{0}}
	v, err := s.Build(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	v.Close()
	// A complete file of partition 2, from another build.
	full := build(t, openTestStore(t, t.TempDir(), Options{}), BuildSpec{DB: "db", Version: "v1", Files: d.files(t)})
	complete, err := os.ReadFile(filepath.Join(full.dir, partitionFile(2)))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	vdir := filepath.Join(dir, "dbs", "db", "v1")
	for name, content := range map[string][]byte{
		partitionFile(1):      complete[:len(complete)/2],
		partitionFile(2):      complete,
		"spill-0000.tmp":      []byte("run"),
		manifestName + ".tmp": []byte("{"),
	} {
		if err := os.WriteFile(filepath.Join(vdir, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	s = openTestStore(t, dir, Options{})
	if names := dirNames(t, vdir); !slices.Equal(names, []string{manifestName, partitionFile(0)}) {
		t.Fatalf("after OpenStore the version dir holds %v", names)
	}
	v, err = s.Open("db", "v1")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if !slices.Equal(v.Manifest().Partitions, []int{0}) {
		t.Fatalf("partitions %v", v.Manifest().Partitions)
	}
	spec.Partitions = []int{1, 2}
	if err := s.AddPartitions(context.Background(), v, spec); err != nil {
		t.Fatal(err)
	}
	checkVersion(t, v, d)
}
