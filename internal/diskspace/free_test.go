//go:build unix

package diskspace

import (
	"os"
	"path/filepath"
	"testing"
)

// TestFree reads a real directory's file system: some bytes are free in
// the test's temporary directory, and a directory that does not exist is
// an error.
func TestFree(t *testing.T) {
	dir := t.TempDir()
	free, err := Free(dir)
	if err != nil || free <= 0 {
		t.Fatalf("Free(%s) = %d, %v; want > 0", dir, free, err)
	}
	if _, err := Free(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Fatalf("Free of a missing directory: %v, want not exist", err)
	}
}
