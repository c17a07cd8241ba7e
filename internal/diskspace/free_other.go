//go:build !unix

package diskspace

import "errors"

// Free is unknown on this platform: it reports errors.ErrUnsupported.
func Free(string) (int64, error) { return 0, errors.ErrUnsupported }
