package blocks

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"

	"github.com/cespare/xxhash/v2"
	"golang.org/x/sync/errgroup"
)

// fileChecksum returns PartitionInfo.FileChecksum of the file at path:
// "xxh64:" and 16 hex digits, XXH64 (seed 0) over the file's bytes.
func fileChecksum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := xxhash.New()
	if _, err := io.CopyBuffer(h, f, make([]byte, 256<<10)); err != nil {
		return "", err
	}
	return fmt.Sprintf("xxh64:%016x", h.Sum64()), nil
}

// verifyFiles checks every held partition's file in dir against m
// (VerifyPartitionFile). Files are read in parallel, GOMAXPROCS at a time.
func verifyFiles(dir string, m *Manifest) error {
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, p := range m.Partitions {
		pi := m.PartitionInfo[i]
		g.Go(func() error { return VerifyPartitionFile(filepath.Join(dir, partitionFile(p)), pi) })
	}
	return g.Wait()
}
