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
	src := t.TempDir()
	d := buildOnDisk(t, src)
	ss := openTestStore(t, src, Options{})
	sv, err := ss.Open("db", "v1")
	if err != nil {
		t.Fatal(err)
	}
	defer sv.Close()
	from := sv.Manifest()
	fetch := func(ctx context.Context, p int, f *os.File) (PartitionInfo, error) {
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
	dir := t.TempDir()
	s := openTestStore(t, dir, Options{})
	failed := errors.New("peer gone")
	_, err = s.Import(context.Background(), ImportSpec{DB: "db", Version: "v1", From: from, Partitions: from.Partitions,
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
