package main

import (
	"os"
	"syscall"
)

// mapFile maps the first size bytes of f, read-only, its pages mapped
// at once (MAP_POPULATE: the page cache's, without a fault each);
// release unmaps them.
func mapFile(f *os.File, size int64) ([]byte, func(), error) {
	if size == 0 {
		return nil, func() {}, nil
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED|syscall.MAP_POPULATE)
	if err != nil {
		return nil, nil, err
	}
	return b, func() { syscall.Munmap(b) }, nil //nolint:errcheck // nothing to do
}
