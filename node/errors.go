package node

import (
	"errors"
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
	// ErrWrongPartition: a lookup on a partition's subject (GetPart) for
	// a key of another partition (NATS 400).
	ErrWrongPartition = errors.New("node: key not in the partition named")
	// ErrPartitionerMismatch: the cluster holds a version built with
	// another partitioner than this node's (the build is refused).
	ErrPartitionerMismatch = errors.New("node: partitioner differs from the cluster's")
)

// ErrConfig: the configuration is invalid.
var ErrConfig = errors.New("node: invalid config")

// ErrTooLarge: a batch lookup whose values exceed GetOptions.MaxBytes
// (HTTP 413).
var ErrTooLarge = errors.New("node: batch reply too large")

// Listing errors (List).
var (
	// ErrBadListing: a listing's parameters are out of range: a limit
	// that is not positive, a prefix, start or end longer than
	// MaxListKeyLen, a cursor of another db (HTTP 400).
	ErrBadListing = errors.New("node: bad listing request")
	// ErrBadCursor: a listing's cursor is not one a node of this cluster
	// made (garbage, damaged, forged; HTTP 400).
	ErrBadCursor = errors.New("node: bad cursor")
	// ErrVersionGone: a listing's cursor names a version no longer held
	// (HTTP 410): its pages are over, and a page of another version would
	// mix versions.
	ErrVersionGone = errors.New("node: the cursor's version is gone")
)

// ErrDBInSource: RemoveDB was asked to remove a db the source's last
// listing holds (remove it from the source first, or it comes back).
var ErrDBInSource = errors.New("node: the db is in the source")
