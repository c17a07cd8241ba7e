package blocks

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenStoreLocked(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = OpenStore(dir, Options{})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second OpenStore: %v, want ErrLocked naming %s", err, dir)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Versions(); !errors.Is(err, ErrClosed) {
		t.Errorf("Versions after Close: %v", err)
	}
	s2, err := OpenStore(dir, Options{})
	if err != nil {
		t.Fatalf("OpenStore after Close: %v", err)
	}
	s2.Close()
}

func TestOpenStoreOptions(t *testing.T) {
	if _, err := OpenStore(t.TempDir(), Options{MemoryBudget: -1}); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("negative budget: %v", err)
	}
	if o := DefaultOptions(); o.MemoryBudget != DefaultMemoryBudget || o.BatchSize != DefaultBatchSize ||
		o.MaxParallelLoads != DefaultMaxParallelLoads || o.MaxParallelWrites < 1 || o.Logger == nil {
		t.Errorf("DefaultOptions() = %+v", o)
	}
}

func TestRestart(t *testing.T) {
	dir := t.TempDir()
	d := makeDataset(t, datasetOpts{files: 3, perFile: 200, seed: 11})
	s, err := OpenStore(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.Build(context.Background(), BuildSpec{DB: "db", Version: "v1", Files: d.files(t),
		Partitioner: sequinsPartitioner{}, PartitionerID: "sequins", Compression: CompressionZstd})
	if err != nil {
		t.Fatal(err)
	}
	v.Close()
	if _, err := s.Build(context.Background(), BuildSpec{DB: "other", Version: "v9", Files: d.files(t),
		Partitioner: sequinsPartitioner{}, Partitions: []int{1}}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// What crashes leave behind.
	vdir := filepath.Join(dir, "dbs", "db")
	mkdir := func(name string, files map[string]string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(vdir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		for n, c := range files {
			if err := os.WriteFile(filepath.Join(vdir, name, n), []byte(c), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	mkdir("v2", map[string]string{"p-00000.bolt": "half a file", "spill-0000.tmp": "x"})
	manifest, err := os.ReadFile(filepath.Join(vdir, "v1", manifestName))
	if err != nil {
		t.Fatal(err)
	}
	mkdir("v3", map[string]string{manifestName: string(manifest[:len(manifest)/2])}) // torn
	mkdir("v4", map[string]string{manifestName: string(manifest)})                   // another version's manifest
	mkdir("v5", map[string]string{manifestName + tmpSuffix: string(manifest)})
	if err := os.WriteFile(filepath.Join(vdir, "v1", manifestName+tmpSuffix), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "dbs", "empty"), 0o755); err != nil {
		t.Fatal(err)
	}

	s = openTestStore(t, dir, Options{})
	ms, err := s.Versions()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, m.DB+"/"+m.Version)
	}
	if strings.Join(got, " ") != "db/v1 other/v9" {
		t.Errorf("Versions() = %v", got)
	}
	for _, gone := range []string{"db/v2", "db/v3", "db/v4", "db/v5", "db/v1/manifest.json.tmp", "empty"} {
		if _, err := os.Stat(filepath.Join(dir, "dbs", gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s not removed: %v", gone, err)
		}
	}
	v, err = s.Open("db", "v1")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	checkVersion(t, v, d)
	if _, err := s.Open("db", "v2"); !errors.Is(err, ErrNoVersion) {
		t.Errorf("Open of a removed version: %v", err)
	}
	if _, err := s.Open("db", "../x"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("Open of a bad name: %v", err)
	}
}

func TestRemove(t *testing.T) {
	d := makeDataset(t, datasetOpts{files: 2, perFile: 20, seed: 12})
	s := openTestStore(t, t.TempDir(), Options{})
	for _, id := range []string{"a/v1", "a/v2", "b/v1"} {
		db, version, _ := strings.Cut(id, "/")
		build(t, s, BuildSpec{DB: db, Version: version, Files: d.files(t)}).Close()
	}
	list := func() string {
		ms, err := s.Versions()
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range ms {
			ids = append(ids, m.DB+"/"+m.Version)
		}
		return strings.Join(ids, " ")
	}
	if err := s.Remove("a", "v1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("a", "nope"); err != nil {
		t.Errorf("Remove of a missing version: %v", err)
	}
	if got := list(); got != "a/v2 b/v1" {
		t.Errorf("after Remove: %s", got)
	}
	if err := s.RemoveDB("b"); err != nil {
		t.Fatal(err)
	}
	if got := list(); got != "a/v2" {
		t.Errorf("after RemoveDB: %s", got)
	}
	if _, err := os.Stat(filepath.Join(s.Dir(), "dbs", "b")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("db dir left: %v", err)
	}
}

// Close cancels a build under way and waits for it to clean up.
func TestCloseCancelsBuild(t *testing.T) {
	d := makeDataset(t, datasetOpts{files: 2, perFile: 2000, seed: 13})
	dir := t.TempDir()
	s, err := OpenStore(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	files := d.files(t)
	started := make(chan struct{})
	files[1].Open = func(ctx context.Context) (io.ReadCloser, error) {
		close(started)
		<-ctx.Done() // until Close cancels the build
		return nil, ctx.Err()
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Build(context.Background(), BuildSpec{DB: "db", Version: "v1", Files: files, Partitioner: sequinsPartitioner{}})
		done <- err
	}()
	<-started
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("build: %v, want context.Canceled", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "dbs", "db", "v1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("version dir left behind: %v", err)
	}
	if _, err := s.Build(context.Background(), BuildSpec{DB: "db", Version: "v1"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Build after Close: %v", err)
	}
}

// A version being built cannot be built again or removed meanwhile.
func TestBuildingVersionIsBusy(t *testing.T) {
	d := makeDataset(t, datasetOpts{files: 2, perFile: 100, seed: 14})
	s := openTestStore(t, t.TempDir(), Options{})
	files := d.files(t)
	started, release := make(chan struct{}), make(chan struct{})
	open := files[0].Open
	files[0].Open = func(ctx context.Context) (io.ReadCloser, error) {
		close(started)
		<-release
		return open(ctx)
	}
	done := make(chan error, 1)
	go func() {
		v, err := s.Build(context.Background(), BuildSpec{DB: "db", Version: "v1", Files: files,
			Partitioner: sequinsPartitioner{}})
		if err == nil {
			v.Close()
		}
		done <- err
	}()
	<-started
	if _, err := s.Build(context.Background(), BuildSpec{DB: "db", Version: "v1", Files: d.files(t),
		Partitioner: sequinsPartitioner{}}); !errors.Is(err, ErrBuilding) {
		t.Errorf("concurrent Build: %v, want ErrBuilding", err)
	}
	if err := s.Remove("db", "v1"); !errors.Is(err, ErrBuilding) {
		t.Errorf("Remove during Build: %v, want ErrBuilding", err)
	}
	if err := s.RemoveDB("db"); !errors.Is(err, ErrBuilding) {
		t.Errorf("RemoveDB during Build: %v, want ErrBuilding", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
