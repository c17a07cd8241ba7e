//go:build !unix

package blocks

import "os"

// lockFile opens path. Without flock there is no lock on this platform (see
// Caveats in doc.go).
func lockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
}
