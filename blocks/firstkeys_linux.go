package blocks

import "syscall"

// unmapPages takes the pages of b, a read-only shared file mapping, out
// of the process's resident set: the walk of buildBlockIndex touched
// every page of the file, and kept mapped they would count in its RSS
// before any Get asked for them (520 against 391 MiB of peak RSS in
// spangle-bench's start, the build's heap not yet returned). The pages
// stay in the page cache: a Get's first read of one maps it again (a
// minor fault), as before the index.
func unmapPages(b []byte) { _ = syscall.Madvise(b, syscall.MADV_DONTNEED) }

// allocIndex returns n bytes of zeroed memory outside the Go heap, page
// aligned, for a blockIndex, and whether they are mapped (freeIndex
// unmaps them); on the heap if no mapping can be had.
func allocIndex(n int) ([]byte, bool) {
	b, err := syscall.Mmap(-1, 0, max(n, 1), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return heapIndex(n), false
	}
	return b[:n], true
}

// freeIndex releases memory allocIndex mapped.
func freeIndex(b []byte) { _ = syscall.Munmap(b[:cap(b)]) }
