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

// verifyFiles checks every held partition's file in dir against m: its
// size, then its checksum where m records one (manifests written before
// file checksums have none: those files are checked by size only). Files
// are read in parallel, GOMAXPROCS at a time. A mismatch is an error
// wrapping ErrCorrupt that names the file.
func verifyFiles(dir string, m *Manifest) error {
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, p := range m.Partitions {
		pi := m.PartitionInfo[i]
		g.Go(func() error {
			path := filepath.Join(dir, partitionFile(p))
			st, err := os.Stat(path)
			if err != nil {
				return fmt.Errorf("%w: %v", ErrCorrupt, err)
			}
			if pi.StoredBytes > 0 && st.Size() != pi.StoredBytes {
				return fmt.Errorf("%w: %s: %d bytes, the manifest says %d", ErrCorrupt, path, st.Size(), pi.StoredBytes)
			}
			if pi.FileChecksum == "" {
				return nil
			}
			sum, err := fileChecksum(path)
			if err != nil {
				return fmt.Errorf("%w: %v", ErrCorrupt, err)
			}
			if sum != pi.FileChecksum {
				return fmt.Errorf("%w: %s: checksum %s, the manifest says %s", ErrCorrupt, path, sum, pi.FileChecksum)
			}
			return nil
		})
	}
	return g.Wait()
}
