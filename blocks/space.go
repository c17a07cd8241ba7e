package blocks

import "github.com/spangledb/spangle/internal/diskspace"

// FreeBytes returns the bytes available to this process on the file
// system holding dir (internal/diskspace owns the rule); it is
// errors.ErrUnsupported where that is unknown.
func FreeBytes(dir string) (int64, error) { return diskspace.Free(dir) }
