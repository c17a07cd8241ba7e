//go:build !unix

package blocks

import (
	"errors"
	"os"
)

// lockFile opens path. Without flock there is no lock on this platform (see
// Caveats in doc.go).
func lockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
}

// FreeBytes is unknown on this platform: it reports ErrUnsupported.
func FreeBytes(dir string) (int64, error) { return 0, errors.ErrUnsupported }
