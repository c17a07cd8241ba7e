package proxy

import "errors"

// Errors of Get. The HTTP status a front door answers with for each is
// given here once; the proxy package itself speaks no HTTP to clients.
var (
	// ErrTimeout: no replica answered within Config.Timeout (HTTP 504).
	ErrTimeout = errors.New("proxy: timeout")
	// ErrNoReplica: there was no peer to ask, or every peer failed — a
	// connection error, a status other than 200 or 404, a body over
	// Config.MaxBodyBytes, or a version other than the one asked for
	// (HTTP 502). The last attempt's error is wrapped as well.
	ErrNoReplica = errors.New("proxy: no replica answered")
	// ErrBodyTooLarge: a peer's body exceeded Config.MaxBodyBytes. It
	// fails that attempt only; Get wraps it in ErrNoReplica.
	ErrBodyTooLarge = errors.New("proxy: body too large")
	// ErrClosed: Get was called after, or cut short by, Shutdown (HTTP 503).
	ErrClosed = errors.New("proxy: closed")
	// ErrInvalidRequest: the Request lacks a db, version or key (a bug in
	// the caller; HTTP 500).
	ErrInvalidRequest = errors.New("proxy: invalid request")
	// ErrInvalidConfig is wrapped by Validate's errors.
	ErrInvalidConfig = errors.New("proxy: invalid config")
)

// A client that goes away while Get waits makes Get return its context's
// error, wrapped: errors.Is(err, context.Canceled) (HTTP 499), or
// context.DeadlineExceeded when the caller's own deadline passed first.
