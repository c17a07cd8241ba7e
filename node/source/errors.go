package source

import (
	"errors"
	"fmt"
)

// ErrPermanent marks a source error that retrying cannot fix (a file
// that is gone, access denied). Sources wrap it; downloads retry every other
// error except the end of their context.
var ErrPermanent = errors.New("source: permanent error")

// ErrNotRegular: an entry of a version directory that is not a readable
// regular file once symlinks are followed (a directory, FIFO, socket,
// device or dangling symlink). The version fails rather than being built
// without it. errors.Is(err, ErrPermanent) is true: retrying the read
// does not help.
var ErrNotRegular = fmt.Errorf("%w: not a regular file", ErrPermanent)

// ErrSymlinkOutside: a symlink of the file source resolves outside the
// source root, and following external symlinks is off.
var ErrSymlinkOutside = fmt.Errorf("%w: symlink leaves the source root", ErrPermanent)
