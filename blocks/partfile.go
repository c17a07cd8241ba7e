package blocks

import (
	"fmt"
	"os"
	"path/filepath"
)

// OpenPartitionFile opens partition p's bbolt file read-only, for a peer
// to copy, and returns it with the partition's entry in the manifest (its
// size and FileChecksum). The caller closes the file; it stays readable
// after the Version is closed or removed. ErrPartitionNotHeld when p is
// not held here, ErrClosed after Close.
func (v *Version) OpenPartitionFile(p int) (*os.File, PartitionInfo, error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.closed {
		return nil, PartitionInfo{}, ErrClosed
	}
	c := v.contents.Load()
	if !c.holds(p) {
		return nil, PartitionInfo{}, fmt.Errorf("%w: %d", ErrPartitionNotHeld, p)
	}
	var pi PartitionInfo
	for _, x := range c.manifest.PartitionInfo {
		if x.Partition == p {
			pi = x
		}
	}
	f, err := os.Open(filepath.Join(v.dir, partitionFile(p)))
	if err != nil {
		return nil, PartitionInfo{}, err
	}
	return f, pi, nil
}
