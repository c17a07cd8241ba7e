package edge

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/spangledb/spangle/internal/errtext"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/batchwire"
	"github.com/spangledb/spangle/node/listwire"
)

// ErrInvalidConfig is wrapped by every error Config.Validate returns.
var ErrInvalidConfig = errors.New("edge: invalid config")

// errTooLarge reports a batch request, or an answer, larger than a limit:
// MaxBatchBytes, or the NATS server's max_payload for a reply.
var errTooLarge = errors.New("edge: too large")

// errNotSupported reports a request the backend cannot answer (a
// backend without key listings): 501.
var errNotSupported = errors.New("edge: not supported")

// statusClientClosedRequest is the non-standard status (nginx's, kept by
// sequins) recorded when the client went away before the answer was ready.
// The client never sees it; it shows in metrics and logs.
const statusClientClosedRequest = 499

// wireCode is one row of the error → HTTP status table. The package doc
// holds the same table for humans (TestErrorTableMatchesDoc checks that
// they agree).
type wireCode struct {
	err    error
	status int // for a client's request
	peer   int // for a peer's request (?proxy=<version>)
	body   string
	level  slog.Level // how a response with this row is logged
	quiet  bool       // not logged at all
	detail bool       // answer with the error's own text rather than body
}

// wireCodes maps the errors of Backend.Get to HTTP statuses. The first row
// whose err matches (errors.Is) wins; an error matching no row is
// errOther. context.Canceled is 499 only when the request's own context is
// done (the client went away); otherwise it is an internal error (500).
//
// Every body is a one-line reason, so that a person with curl learns what
// happened; only a missing key's 404 (a lookup that succeeded, see
// writeResult) is empty, as sequins' was.
var wireCodes = [...]wireCode{
	{err: node.ErrUnknownDB, status: http.StatusNotFound, peer: http.StatusNotImplemented, quiet: true,
		body: "unknown db: this node serves no db of that name\n"},
	{err: node.ErrNoVersion, status: http.StatusNotFound, peer: http.StatusNotImplemented, quiet: true,
		body: "the db has no version yet\n"},
	{err: node.ErrUnknownVersion, status: http.StatusNotImplemented, peer: http.StatusNotImplemented, quiet: true,
		body: "unknown version: this node does not hold the version named\n"},
	{err: node.ErrWrongPartition, status: http.StatusBadRequest, peer: http.StatusBadRequest, quiet: true, detail: true},
	{err: node.ErrPartitionNotHeld, status: http.StatusInternalServerError, peer: http.StatusInternalServerError,
		body: "partition not held here\n", level: slog.LevelWarn},
	{err: node.ErrNoReplica, status: http.StatusBadGateway, peer: http.StatusBadGateway,
		body: "no replica answered\n", level: slog.LevelWarn},
	{err: node.ErrProxyTimeout, status: http.StatusGatewayTimeout, peer: http.StatusGatewayTimeout,
		body: "proxy timeout\n", level: slog.LevelWarn},
	{err: context.DeadlineExceeded, status: http.StatusGatewayTimeout, peer: http.StatusGatewayTimeout,
		body: "timeout\n", level: slog.LevelWarn},
	// Batch lookups (HTTP and NATS) and NATS replies.
	{err: batchwire.ErrMalformed, status: http.StatusBadRequest, peer: http.StatusBadRequest,
		level: slog.LevelInfo, detail: true},
	{err: batchwire.ErrTooManyKeys, status: http.StatusRequestEntityTooLarge, peer: http.StatusRequestEntityTooLarge,
		level: slog.LevelInfo, detail: true},
	{err: errTooLarge, status: http.StatusRequestEntityTooLarge, peer: http.StatusRequestEntityTooLarge,
		level: slog.LevelInfo, detail: true},
	{err: node.ErrTooLarge, status: http.StatusRequestEntityTooLarge, peer: http.StatusRequestEntityTooLarge,
		level: slog.LevelInfo, detail: true},
	// Key listings.
	{err: errNotSupported, status: http.StatusNotImplemented, peer: http.StatusNotImplemented,
		level: slog.LevelInfo, detail: true},
	{err: node.ErrBadListing, status: http.StatusBadRequest, peer: http.StatusBadRequest,
		level: slog.LevelInfo, detail: true},
	{err: node.ErrBadCursor, status: http.StatusBadRequest, peer: http.StatusBadRequest,
		level: slog.LevelInfo, detail: true},
	{err: node.ErrVersionGone, status: http.StatusGone, peer: http.StatusGone,
		level: slog.LevelInfo, detail: true},
	{err: listwire.ErrMalformed, status: http.StatusBadRequest, peer: http.StatusBadRequest,
		level: slog.LevelInfo, detail: true},
}

// errClientGone is the row for a lookup abandoned by its client.
var errClientGone = wireCode{status: statusClientClosedRequest, peer: statusClientClosedRequest, level: slog.LevelInfo}

// errOther is the row for any error the table does not name.
var errOther = wireCode{status: http.StatusInternalServerError, peer: http.StatusInternalServerError,
	body: "internal server error\n", level: slog.LevelError}

// lookupWireCode returns the row for err, a non-nil error from Backend.Get
// for request r.
func lookupWireCode(r *http.Request, err error) *wireCode {
	return wireCodeFor(r.Context(), err)
}

// wireCodeFor returns the row for err, a non-nil error of a lookup made
// for a request whose own context is ctx (HTTP or NATS).
func wireCodeFor(ctx context.Context, err error) *wireCode {
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return &errClientGone
	}
	for i := range wireCodes {
		if errors.Is(err, wireCodes[i].err) {
			return &wireCodes[i]
		}
	}
	return &errOther
}

// message returns the text answered for err under row: the error's own
// (without its Go package prefixes: errtext) when the row says so, else
// the row's body; "" for none.
func (row *wireCode) message(err error) string {
	if row.detail {
		return errtext.Strip(err.Error()) + "\n"
	}
	return row.body
}

// dbKnown reports whether a lookup that failed with err proves that the
// backend knows the db (which then may have its own metrics label).
func dbKnown(err error) bool {
	return errors.Is(err, node.ErrNoVersion) || errors.Is(err, node.ErrUnknownVersion) ||
		errors.Is(err, node.ErrPartitionNotHeld) || errors.Is(err, node.ErrNoReplica) ||
		errors.Is(err, node.ErrProxyTimeout)
}
