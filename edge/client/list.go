package client

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"

	"github.com/spangledb/spangle/edge/internal/natswire"
	"github.com/spangledb/spangle/kvwatch/names"
	"github.com/spangledb/spangle/node/listwire"
)

// ListOptions qualify a listing (ListEntries).
type ListOptions struct {
	// Prefix keeps the keys starting with it; Start and End (excluded)
	// bound them. Empty: unbounded.
	Prefix, Start, End []byte
	// PageSize is the keys asked per page; 0: the nodes' max_list_keys.
	PageSize int
	// Values lists the values too.
	Values bool
}

// Entry is one key of a listing and, with ListOptions.Values, its value.
type Entry struct {
	Key, Value []byte
}

// List returns db's keys starting with prefix, in bytewise order: an
// iterator that asks for page after page, following the nodes' cursors,
// all pages from the version of the first one. It yields each key with a
// nil error, or a nil key and the error that ended the listing (a page
// retried as Get retries; a version gone in the middle of a listing,
// ErrVersionGone, is not retried: list again). The keys are the
// caller's.
func (c *Client) List(ctx context.Context, db string, prefix []byte) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		for e, err := range c.ListEntries(ctx, db, ListOptions{Prefix: prefix}) {
			if !yield(e.Key, err) || err != nil {
				return
			}
		}
	}
}

// ListEntries is List with options: a range, a page size, values.
func (c *Client) ListEntries(ctx context.Context, db string, opts ListOptions) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		cursor := ""
		for {
			page, err := c.listPage(ctx, db, opts, cursor)
			if err != nil {
				yield(Entry{}, err)
				return
			}
			for i, k := range page.Keys {
				e := Entry{Key: k}
				if opts.Values {
					e.Value = page.Values[i]
				}
				if !yield(e, nil) {
					return
				}
			}
			if page.Cursor == "" {
				return
			}
			cursor = page.Cursor
		}
	}
}

// listPage asks for one page, with Get's retries.
func (c *Client) listPage(ctx context.Context, db string, opts ListOptions, cursor string) (listwire.Reply, error) {
	if c.closed.Load() {
		return listwire.Reply{}, ErrClosed
	}
	for a := c.newAttempts(); ; {
		var page listwire.Reply
		var retry bool
		var err error
		if c.cfg.Conn != nil {
			page, retry, err = c.natsList(ctx, db, opts, cursor)
		} else {
			page, retry, err = c.httpList(ctx, &a, db, opts, cursor)
		}
		if err == nil || !retry {
			return page, err
		}
		if err := a.next(ctx, err); err != nil {
			return listwire.Reply{}, err
		}
	}
}

// httpList does one attempt of a page over HTTP: GET /<db>/?….
func (c *Client) httpList(ctx context.Context, a *attempts, db string, opts ListOptions, cursor string) (listwire.Reply, bool, error) {
	ctx, cancel := c.attemptContext(ctx)
	defer cancel()
	i := c.pickNode(a)
	base := c.cfg.URLs[i]
	q := url.Values{"values": {"0"}}
	if opts.Values {
		q.Set("values", "1")
	}
	for name, v := range map[string][]byte{"prefix": opts.Prefix, "start": opts.Start, "end": opts.End} {
		if len(v) > 0 {
			q.Set(name, string(v))
		}
	}
	if opts.PageSize > 0 {
		q.Set("limit", strconv.Itoa(opts.PageSize))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/"+url.PathEscape(db)+"/?"+q.Encode(), nil)
	if err != nil {
		return listwire.Reply{}, false, fmt.Errorf("client: %w", err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			c.markDown(i)
		}
		return listwire.Reply{}, true, fmt.Errorf("client: GET %s: %w", base, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return listwire.Reply{}, true, fmt.Errorf("client: GET %s: read: %w", base, err)
		}
		page, err := decodeJSONPage(b, opts.Values)
		if err != nil {
			return listwire.Reply{}, false, fmt.Errorf("client: GET %s: %w", base, err)
		}
		return page, false, nil
	case http.StatusNotFound:
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody)) //nolint:errcheck // draining for keep-alive
		return listwire.Reply{}, false, fmt.Errorf("%w: %s", ErrUnknownDB, db)
	}
	return listwire.Reply{}, retryable(resp.StatusCode), httpStatusError(base, resp)
}

// decodeJSONPage reads a page as the HTTP door writes it (docs/API.md,
// "Listing keys"): strings, or base64 when the page says so.
func decodeJSONPage(b []byte, values bool) (listwire.Reply, error) {
	var p struct {
		Version  string   `json:"version"`
		Encoding string   `json:"encoding"`
		Keys     []string `json:"keys"`
		Values   []string `json:"values"`
		Cursor   string   `json:"cursor"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return listwire.Reply{}, fmt.Errorf("bad listing page: %w", err)
	}
	if values && len(p.Values) != len(p.Keys) {
		return listwire.Reply{}, fmt.Errorf("bad listing page: %d values for %d keys", len(p.Values), len(p.Keys))
	}
	items := func(in []string) ([][]byte, error) {
		out := make([][]byte, len(in))
		for i, s := range in {
			switch p.Encoding {
			case "":
				out[i] = []byte(s)
			case "base64":
				b, err := base64.StdEncoding.DecodeString(s)
				if err != nil {
					return nil, fmt.Errorf("bad listing page: %w", err)
				}
				out[i] = b
			default:
				return nil, fmt.Errorf("bad listing page: encoding %q", p.Encoding)
			}
		}
		return out, nil
	}
	page := listwire.Reply{Version: p.Version, Cursor: p.Cursor, HasValues: values}
	var err error
	if page.Keys, err = items(p.Keys); err != nil {
		return listwire.Reply{}, err
	}
	if values {
		if page.Values, err = items(p.Values); err != nil {
			return listwire.Reply{}, err
		}
	}
	return page, nil
}

// natsList does one attempt of a page over NATS: the list subject.
func (c *Client) natsList(ctx context.Context, db string, opts ListOptions, cursor string) (listwire.Reply, bool, error) {
	subject := names.ListSubject(c.cfg.ClusterName, db)
	body := listwire.AppendRequest(nil, listwire.Request{Prefix: opts.Prefix, Start: opts.Start, End: opts.End,
		Limit: opts.PageSize, Values: opts.Values, Cursor: cursor})
	msg, err := c.request(ctx, subject, body)
	if err != nil {
		return listwire.Reply{}, retryableNATS(err), natsError(subject, err)
	}
	status, err := replyStatus(subject, msg)
	if err != nil {
		return listwire.Reply{}, false, err
	}
	switch status {
	case http.StatusOK:
		page, err := listwire.DecodeReply(msg.Data, len(msg.Data))
		if err != nil {
			return listwire.Reply{}, false, fmt.Errorf("client: %s: %w", subject, err)
		}
		return page, false, nil
	case http.StatusNotFound:
		return listwire.Reply{}, false, fmt.Errorf("%w: %s", ErrUnknownDB, db)
	}
	return listwire.Reply{}, retryable(status), &StatusError{Status: status, Message: msg.Header.Get(natswire.HeaderError), From: subject}
}
