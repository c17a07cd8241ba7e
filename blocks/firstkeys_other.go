//go:build !linux

package blocks

// unmapPages does nothing here (see firstkeys_linux.go).
func unmapPages([]byte) {}
