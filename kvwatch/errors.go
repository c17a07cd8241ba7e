package kvwatch

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidConfig is wrapped by the errors of Config.Validate.
	ErrInvalidConfig = errors.New("kvwatch: invalid config")

	// ErrEmbeddedServer: the embedded server could not start (a port in
	// use, say). Retrying does not help: it is the configuration's or the
	// machine's to fix.
	ErrEmbeddedServer = errors.New("kvwatch: embedded NATS server cannot start")

	// ErrInsecure: the embedded server would accept unauthenticated
	// clients on an address other hosts reach. It wraps ErrInvalidConfig.
	ErrInsecure = fmt.Errorf("%w: insecure embedded server", ErrInvalidConfig)

	// ErrInvalidKey reports a key that is not one or more dot-separated
	// names matching ^[-_a-zA-Z0-9]+$.
	ErrInvalidKey = errors.New("kvwatch: invalid key")

	// ErrInvalidBucket reports a Bucket value outside Nodes, Partitions and
	// Versions.
	ErrInvalidBucket = errors.New("kvwatch: invalid bucket")

	// ErrWrongBucket reports an operation on a bucket it does not apply to:
	// Publish and Withdraw take the TTL'd buckets (Nodes, Partitions), Put
	// and Delete take Versions (a plain put on a TTL'd key would make it
	// permanent).
	ErrWrongBucket = errors.New("kvwatch: wrong bucket for this operation")

	// ErrMirror reports a write to Versions in a region: there it is the
	// mirror of the hub's bucket, written at the hub only (a write to a
	// mirror would go to the hub).
	ErrMirror = errors.New("kvwatch: versions is the hub's mirror in a region: read-only")

	// ErrNotStarted reports an operation before Start has succeeded.
	ErrNotStarted = errors.New("kvwatch: not started")

	// ErrStarted reports a second call of Start.
	ErrStarted = errors.New("kvwatch: already started")

	// ErrClosed reports an operation after Shutdown.
	ErrClosed = errors.New("kvwatch: shut down")

	// ErrConflict reports an own key that kept changing under a write: it
	// was written by someone else between reading and replacing it, several
	// times in a row.
	ErrConflict = errors.New("kvwatch: key keeps changing under us")
)
