//go:build !linux

package blocks

// unmapPages does nothing here (see firstkeys_linux.go).
func unmapPages([]byte) {}

// allocIndex returns n bytes of zeroed memory for a blockIndex: on the
// heap here (not mapped).
func allocIndex(n int) ([]byte, bool) { return heapIndex(n), false }

// freeIndex is not called here: nothing is mapped.
func freeIndex([]byte) {}
