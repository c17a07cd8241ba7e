package blocks

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestImport: a version imported from another store's files (checked
// with FileSum as they are copied) reads as the built one and reopens
// verified; a Fetch error leaves nothing; a complete version is ErrExists.
func TestImport(t *testing.T) {
	d, sv := importSource(t)
	from := sv.Manifest()
	fetch := fetchFrom(sv)
	dir := t.TempDir()
	s := openTestStore(t, dir, Options{})
	failed := errors.New("peer gone")
	_, err := s.Import(context.Background(), ImportSpec{DB: "db", Version: "v1", From: from, Partitions: from.Partitions,
		Fetch: func(ctx context.Context, p int, f *os.File) (PartitionInfo, error) {
			if p == from.Partitions[len(from.Partitions)-1] {
				return PartitionInfo{}, failed
			}
			return fetch(ctx, p, f)
		}})
	if !errors.Is(err, failed) {
		t.Fatalf("failed fetch: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "dbs", "db", "v1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed import left its directory: %v", err)
	}
	v, err := s.Import(context.Background(), ImportSpec{DB: "db", Version: "v1", From: from, Partitions: from.Partitions, Fetch: fetch})
	if err != nil {
		t.Fatal(err)
	}
	checkVersion(t, v, d)
	v.Close()
	if _, err := s.Import(context.Background(), ImportSpec{DB: "db", Version: "v1", From: from, Partitions: from.Partitions, Fetch: fetch}); !errors.Is(err, ErrExists) {
		t.Fatalf("again: %v", err)
	}
	s.Close()
	s = openTestStore(t, dir, Options{})
	defer s.Close()
	v, err = s.Open("db", "v1") // verified against the imported manifest
	if err != nil {
		t.Fatal(err)
	}
	checkVersion(t, v, d)
	v.Close()
}

// TestImportPartial: with Partial, a partition whose Fetch fails is left
// out (its file removed) and the others are imported; AddPartitions from
// the source then completes the version, which reads as the built one.
// Import still fails when no partition could be fetched. Without Partial
// the first import fails (TestImport).
func TestImportPartial(t *testing.T) {
	d, sv := importSource(t)
	from := sv.Manifest()
	failed := errors.New("no holder gives it")
	lost := from.Partitions[1]
	fetch := func(ctx context.Context, p int, f *os.File) (PartitionInfo, error) {
		if p == lost {
			_, _ = f.WriteString("half a file")
			return PartitionInfo{}, failed
		}
		return fetchFrom(sv)(ctx, p, f)
	}
	dir := t.TempDir()
	s := openTestStore(t, dir, Options{})
	defer s.Close()
	if _, err := s.Import(context.Background(), ImportSpec{DB: "db", Version: "v0", From: from, Partitions: []int{lost},
		Fetch: fetch, Partial: true}); !errors.Is(err, failed) {
		t.Fatalf("no partition fetched: %v", err)
	}
	v, err := s.Import(context.Background(), ImportSpec{DB: "db", Version: "v1", From: from, Partitions: from.Partitions,
		Fetch: fetch, Parallel: 2, Partial: true})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	m := v.Manifest()
	if len(m.Partitions) != len(from.Partitions)-1 || v.Holds(lost) {
		t.Fatalf("imported %v of %v, partition %d failed", m.Partitions, from.Partitions, lost)
	}
	if _, err := os.Stat(filepath.Join(dir, "dbs", "db", "v1", partitionFile(lost))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the failed partition's file was left: %v", err)
	}
	checkVersion(t, v, d)
	spec := BuildSpec{DB: "db", Version: "v1", Files: d.files(t), Partitioner: sequinsPartitioner{}, PartitionerID: "sequins",
		Partitions: []int{lost}}
	if err := s.AddPartitions(context.Background(), v, spec); err != nil {
		t.Fatal(err)
	}
	if len(v.Manifest().Partitions) != len(from.Partitions) {
		t.Fatalf("after the build of the rest: %v", v.Manifest().Partitions)
	}
	checkVersion(t, v, d)
}

// importSource builds the test dataset (buildOnDisk) as version v1 of db
// in a store of its own: the source an import copies from. The store and
// the version are closed when t ends.
func importSource(t *testing.T) (*dataset, *Version) {
	t.Helper()
	src := t.TempDir()
	d := buildOnDisk(t, src)
	sv, err := openTestStore(t, src, Options{}).Open("db", "v1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sv.Close() })
	return d, sv
}

// fetchFrom is an ImportSpec.Fetch that copies sv's partition files,
// checking each against its checksum as it writes it (FileSum), as a
// peer copy does.
func fetchFrom(sv *Version) func(ctx context.Context, p int, f *os.File) (PartitionInfo, error) {
	return func(ctx context.Context, p int, f *os.File) (PartitionInfo, error) {
		in, pi, err := sv.OpenPartitionFile(p)
		if err != nil {
			return pi, err
		}
		defer in.Close()
		sum, err := NewFileSum(pi.FileChecksum)
		if err != nil {
			return pi, err
		}
		if _, err := io.Copy(io.MultiWriter(f, sum), in); err != nil {
			return pi, err
		}
		return pi, sum.Check()
	}
}
