package node

import (
	"errors"
	"fmt"
)

var (
	// ErrUnknownDB: no such db (HTTP 404 without a version header).
	ErrUnknownDB = errors.New("node: unknown db")
	// ErrNoVersion: the db exists but has no active version yet (404, no version header).
	ErrNoVersion = errors.New("node: db has no active version")
	// ErrUnknownVersion: a lookup named a version this node does not have (HTTP 501).
	ErrUnknownVersion = errors.New("node: unknown version")
	// ErrPartitionNotHeld: a pinned lookup for a partition this node does not hold (HTTP 500).
	ErrPartitionNotHeld = errors.New("node: partition not held here")
	// ErrNoReplica: no peer could answer (HTTP 502).
	ErrNoReplica = errors.New("node: no replica answered")
	// ErrProxyTimeout: peers did not answer within proxy_timeout (HTTP 504).
	ErrProxyTimeout = errors.New("node: proxy timeout")
	// ErrPartitionerMismatch: the cluster holds a version built with
	// another partitioner than this node's (the build is refused).
	ErrPartitionerMismatch = errors.New("node: partitioner differs from the cluster's")
)

// ErrConfig: the configuration is invalid.
var ErrConfig = errors.New("node: invalid config")

// ErrPermanent marks a source error that retrying cannot fix (a file
// that is gone, access denied). Sources wrap it; downloads retry every other
// error except the end of their context.
var ErrPermanent = errors.New("node: permanent source error")

// ErrNotRegular: an entry of a version directory that is not a readable
// regular file once symlinks are followed (a directory, FIFO, socket,
// device or dangling symlink). The version fails rather than being built
// without it. errors.Is(err, ErrPermanent) is true: retrying the read
// does not help.
var ErrNotRegular = fmt.Errorf("%w: not a regular file", ErrPermanent)

// ErrSymlinkOutside: a symlink of the file source resolves outside the
// source root, and Config.AllowExternalSymlinks is off.
var ErrSymlinkOutside = fmt.Errorf("%w: symlink leaves the source root", ErrPermanent)

// ErrTooLarge: a batch lookup whose values exceed GetOptions.MaxBytes
// (HTTP 413).
var ErrTooLarge = errors.New("node: batch reply too large")
