package client

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spangledb/spangle/node/batchwire"
)

// maxErrorBody bounds how much of an error answer's body is read.
const maxErrorBody = 4 << 10

// pickNode returns the index of the node an attempt asks: a's next one,
// or the first after it that no connection error marked down recently
// (if all are, a's next one anyway). It moves a on.
func (c *Client) pickNode(a *attempts) int {
	n := len(c.cfg.URLs)
	now := time.Now().UnixNano()
	pick := a.node % n
	for i := range n {
		if j := (a.node + i) % n; c.down[j].Load() <= now {
			pick = j
			break
		}
	}
	a.node = pick + 1
	return pick
}

// markDown makes attempts skip node i for MaxBackoff: it refused or
// dropped a connection.
func (c *Client) markDown(i int) {
	c.down[i].Store(time.Now().Add(c.cfg.MaxBackoff).UnixNano())
}

// keyPath escapes key as the rest of a lookup path: every byte but the
// unreserved ones is percent-encoded, "/" included, so that the server's
// decoded path is "/<db>/" followed by exactly the key's bytes.
func keyPath(key []byte) string {
	var b strings.Builder
	b.Grow(len(key) * 3)
	const hex = "0123456789ABCDEF"
	for _, c := range key {
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			if c == '.' && (len(key) == 1 || len(key) == 2 && key[0] == '.' && key[1] == '.') {
				b.WriteString("%2E") // "." and ".." would be path steps to some proxies
				continue
			}
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// httpGet does one attempt of Get over HTTP. An empty key has no lookup
// path (GET /<db>/ is the db's status), so it goes as a batch of one.
func (c *Client) httpGet(ctx context.Context, a *attempts, db string, key []byte) (Result, bool, error) {
	if len(key) == 0 {
		rs, retry, err := c.httpGetMany(ctx, a, db, [][]byte{key})
		if err != nil {
			return Result{}, retry, err
		}
		return rs[0], false, nil
	}
	ctx, cancel := c.attemptContext(ctx)
	defer cancel()
	i := c.pickNode(a)
	base := c.cfg.URLs[i]
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/"+url.PathEscape(db)+"/"+keyPath(key), nil)
	if err != nil {
		return Result{}, false, fmt.Errorf("client: %w", err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			c.markDown(i)
		}
		return Result{}, true, fmt.Errorf("client: GET %s: %w", base, err)
	}
	defer resp.Body.Close()
	version := resp.Header.Get("X-Spangle-Version")
	switch resp.StatusCode {
	case http.StatusOK:
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return Result{}, true, fmt.Errorf("client: GET %s: read: %w", base, err)
		}
		return Result{Value: body, Found: true, Version: version, ContentType: contentType(resp.Header.Get("Content-Type"))}, false, nil
	case http.StatusNotFound:
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody)) //nolint:errcheck // draining for keep-alive
		if version == "" {
			return Result{}, false, fmt.Errorf("%w: %s", ErrUnknownDB, db)
		}
		return Result{Version: version}, false, nil
	}
	return Result{}, retryable(resp.StatusCode), httpStatusError(base, resp)
}

// httpGetMany does one attempt of GetMany over HTTP: POST /<db>/_batch.
func (c *Client) httpGetMany(ctx context.Context, a *attempts, db string, keys [][]byte) ([]Result, bool, error) {
	ctx, cancel := c.attemptContext(ctx)
	defer cancel()
	i := c.pickNode(a)
	base := c.cfg.URLs[i]
	body := batchwire.AppendRequest(make([]byte, 0, batchwire.RequestSize(keys)), keys)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/"+url.PathEscape(db)+"/_batch", bytes.NewReader(body))
	if err != nil {
		return nil, false, fmt.Errorf("client: %w", err)
	}
	req.Header.Set("Content-Type", batchwire.ContentType)
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			c.markDown(i)
		}
		return nil, true, fmt.Errorf("client: POST %s: %w", base, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, true, fmt.Errorf("client: POST %s: read: %w", base, err)
		}
		rs, err := decodeBatch(b, len(keys))
		if err != nil {
			return nil, false, fmt.Errorf("client: POST %s: %w", base, err)
		}
		return rs, false, nil
	case http.StatusNotFound:
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody)) //nolint:errcheck // draining for keep-alive
		return nil, false, fmt.Errorf("%w: %s", ErrUnknownDB, db)
	}
	return nil, retryable(resp.StatusCode), httpStatusError(base, resp)
}

func httpStatusError(base string, resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return &StatusError{Status: resp.StatusCode, Message: strings.TrimSpace(string(b)), From: base}
}

// contentType maps the default media type to "".
func contentType(ct string) string {
	if ct == "application/octet-stream" {
		return ""
	}
	return ct
}

// decodeBatch turns a batch reply answering want keys into results.
func decodeBatch(b []byte, want int) ([]Result, error) {
	r, err := batchwire.DecodeReply(b, want)
	if err != nil {
		return nil, err
	}
	if len(r.Items) != want {
		return nil, fmt.Errorf("%w: %d answers for %d keys", batchwire.ErrMalformed, len(r.Items), want)
	}
	rs := make([]Result, len(r.Items))
	for i, it := range r.Items {
		rs[i] = Result{Version: r.Version}
		switch it.Status {
		case batchwire.Found:
			rs[i].Found, rs[i].Value, rs[i].ContentType = true, it.Value, r.ContentType
		case batchwire.Failed:
			return nil, &StatusError{Status: http.StatusBadGateway, Message: fmt.Sprintf("key %d: %s", i, it.Value), From: "batch"}
		}
	}
	return rs, nil
}
