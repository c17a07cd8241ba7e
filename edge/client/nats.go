package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/spangledb/spangle/edge/internal/natswire"
	"github.com/spangledb/spangle/kvwatch/names"
	"github.com/spangledb/spangle/node/batchwire"
)

// natsGet does one attempt of Get over NATS: to the key's part subject
// when the cluster map allows, else (or when no replica answers there) to
// the get subject.
func (c *Client) natsGet(ctx context.Context, db string, key []byte) (Result, bool, error) {
	if subject := c.cmap.Load().partSubject(c, db, key); subject != "" {
		res, retry, err := c.natsLookup(ctx, subject, db, key)
		if !errors.Is(err, nats.ErrNoResponders) {
			return res, retry, err
		}
		// Nobody holds that partition of that version (any more): a node
		// that knows the db's version finds the key.
	}
	return c.natsLookup(ctx, names.GetSubject(c.cfg.ClusterName, db), db, key)
}

// request sends one request to subject and waits for the reply, at most
// Config.Timeout. A context that cannot be cancelled costs no context of
// its own: the connection's pooled timer bounds the wait.
func (c *Client) request(ctx context.Context, subject string, data []byte) (*nats.Msg, error) {
	if ctx.Done() == nil {
		return c.cfg.Conn.Request(subject, data, c.cfg.Timeout)
	}
	ctx, cancel := c.attemptContext(ctx)
	defer cancel()
	return c.cfg.Conn.RequestWithContext(ctx, subject, data)
}

// natsLookup sends one lookup to subject.
func (c *Client) natsLookup(ctx context.Context, subject, db string, key []byte) (Result, bool, error) {
	msg, err := c.request(ctx, subject, key)
	if err != nil {
		return Result{}, retryableNATS(err), natsError(subject, err)
	}
	status, err := replyStatus(subject, msg)
	if err != nil {
		return Result{}, false, err
	}
	version := msg.Header.Get(natswire.HeaderVersion)
	switch status {
	case http.StatusOK:
		return Result{Value: msg.Data, Found: true, Version: version, ContentType: contentType(msg.Header.Get(natswire.HeaderContentType))}, false, nil
	case http.StatusNotFound:
		if version == "" {
			return Result{}, false, fmt.Errorf("%w: %s", ErrUnknownDB, db)
		}
		return Result{Version: version}, false, nil
	}
	return Result{}, retryable(status), &StatusError{Status: status, Message: msg.Header.Get(natswire.HeaderError), From: subject}
}

// natsGetMany does one attempt of GetMany over NATS: the mget subject.
func (c *Client) natsGetMany(ctx context.Context, db string, keys [][]byte) ([]Result, bool, error) {
	subject := names.MGetSubject(c.cfg.ClusterName, db)
	body := batchwire.AppendRequest(make([]byte, 0, batchwire.RequestSize(keys)), keys)
	msg, err := c.request(ctx, subject, body)
	if err != nil {
		return nil, retryableNATS(err), natsError(subject, err)
	}
	status, err := replyStatus(subject, msg)
	if err != nil {
		return nil, false, err
	}
	switch status {
	case http.StatusOK:
		rs, err := decodeBatch(msg.Data, len(keys))
		if err != nil {
			return nil, false, fmt.Errorf("client: %s: %w", subject, err)
		}
		return rs, false, nil
	case http.StatusNotFound:
		return nil, false, fmt.Errorf("%w: %s", ErrUnknownDB, db)
	}
	return nil, retryable(status), &StatusError{Status: status, Message: msg.Header.Get(natswire.HeaderError), From: subject}
}

// replyStatus reads a reply's Spangle-Status.
func replyStatus(subject string, msg *nats.Msg) (int, error) {
	s := msg.Header.Get(natswire.HeaderStatus)
	status, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("client: %s: reply without a valid %s header (%q)", subject, natswire.HeaderStatus, s)
	}
	return status, nil
}

// retryableNATS reports whether a request error may pass on a later try:
// nobody answered (a node leaving, NATS reconnecting), or too late.
func retryableNATS(err error) bool {
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrConnectionReconnecting) ||
		errors.Is(err, nats.ErrDisconnected)
}

// natsError wraps a request error; a request over max_payload is
// ErrTooLarge.
func natsError(subject string, err error) error {
	if errors.Is(err, nats.ErrMaxPayload) {
		return fmt.Errorf("%w: request to %s exceeds the NATS max_payload: %w", ErrTooLarge, subject, err)
	}
	return fmt.Errorf("client: %s: %w", subject, err)
}
