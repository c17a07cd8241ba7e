package client

import (
	"errors"
	"fmt"
	"net/http"
)

var (
	// ErrInvalidConfig is wrapped by every error of Config.Validate.
	ErrInvalidConfig = errors.New("client: invalid config")
	// ErrUnknownDB: the db is unknown, or has no version yet (a 404
	// without a version).
	ErrUnknownDB = errors.New("client: unknown db or no version")
	// ErrTooLarge: the request or its answer exceeds a limit (keys per
	// batch, request bytes, the NATS server's max_payload). Split the
	// batch, or fetch large values over HTTP.
	ErrTooLarge = errors.New("client: too large")
	// ErrUnavailable: no node answered within the attempts (connection
	// errors, timeouts, no responders, 5xx); it wraps the last failure.
	ErrUnavailable = errors.New("client: no node answered")
	// ErrVersionGone: a listing's version is no longer held anywhere
	// (410): list again, from the start.
	ErrVersionGone = errors.New("client: the listing's version is gone")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("client: closed")
)

// StatusError is an answer with a status other than 200 and 404: the
// status, the node's reason (Spangle-Error or the HTTP body) and where it
// came from (a node URL or a NATS subject). errors.Is matches ErrTooLarge
// for 413.
type StatusError struct {
	Status  int
	Message string
	From    string
}

func (e *StatusError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	return fmt.Sprintf("client: %s answered %d: %s", e.From, e.Status, msg)
}

// Is reports whether target is ErrTooLarge and the status 413, or
// ErrVersionGone and the status 410.
func (e *StatusError) Is(target error) bool {
	return target == ErrTooLarge && e.Status == http.StatusRequestEntityTooLarge ||
		target == ErrVersionGone && e.Status == http.StatusGone
}

// retryable reports whether an answer with status may succeed on another
// node or later: server-side failures other than 501 (a node that does
// not know a pinned version will not learn it by being asked again).
func retryable(status int) bool {
	return status >= 500 && status != http.StatusNotImplemented
}
