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
	// ErrPartitionerMismatch: the cluster holds a version built with
	// another partitioner than this node's (the build is refused).
	ErrPartitionerMismatch = errors.New("node: partitioner differs from the cluster's")
)

// ErrConfig: the configuration is invalid.
var ErrConfig = errors.New("node: invalid config")

// ErrTooLarge: a batch lookup whose values exceed GetOptions.MaxBytes
// (HTTP 413).
var ErrTooLarge = errors.New("node: batch reply too large")
