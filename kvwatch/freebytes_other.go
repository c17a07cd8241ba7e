//go:build !unix

package kvwatch

import "errors"

// freeBytes is unsupported here: the supervisor restarts without waiting
// for space.
func freeBytes(string) (int64, error) { return 0, errors.ErrUnsupported }
