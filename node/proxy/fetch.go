package proxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// Header names read from peers.
const (
	hdrVersion = "X-Spangle-Version"
	userAgent  = "spangle-proxy"
)

// Request headers, shared by every request: the transport only reads
// them. A batch of lookups is as idempotent as a GET: the empty
// Idempotency-Key, which is not sent, lets the transport retry it on a
// fresh connection when a kept-alive one turns out to be closed.
var (
	getHeader   = http.Header{"User-Agent": {userAgent}}
	batchHeader = http.Header{"User-Agent": {userAgent}, "Content-Type": {batchContentType}, "Idempotency-Key": {}}

	// PeerTokenHeader carries Config.PeerToken to peers.
	PeerTokenHeader = "X-Spangle-Peer-Token"
)

var (
	errStatus  = errors.New("proxy: unexpected status")
	errVersion = errors.New("proxy: peer answered from another version")
	// errRefused: the peer did not answer a batch as a whole (see
	// refusedBatch); its keys are asked one by one.
	errRefused = errors.New("proxy: batch refused")
)

// checkPeer rejects an address that would not make a "host:port" of a
// request URL.
func checkPeer(peer string) error {
	if peer == "" || strings.ContainsAny(peer, "/?#@ \t\r\n") {
		return fmt.Errorf("proxy: invalid peer address %q", peer)
	}
	return nil
}

// newPeerRequest builds a request to peer for path and query (escaped
// already) without parsing a URL.
func newPeerRequest(ctx context.Context, method, scheme, peer, path, query string, header http.Header, body []byte) (*http.Request, error) {
	hreq, err := http.NewRequestWithContext(ctx, method, "", nil)
	if err != nil {
		return nil, err
	}
	*hreq.URL = url.URL{Scheme: scheme, Host: peer, Opaque: path, RawQuery: query} // the empty one parsed from ""
	hreq.Host = peer
	hreq.Header = header
	if body != nil {
		hreq.Body = io.NopCloser(bytes.NewReader(body))
		hreq.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		hreq.ContentLength = int64(len(body))
	}
	return hreq, nil
}

// ask sends req to peer alone, as GET /<db>/<key>?proxy=<version>, and
// returns its 200 or 404, or why not.
func (p *Proxy) ask(ctx context.Context, peer string, req *Request) (Response, error) {
	path, query := requestTarget(*req)
	hreq, err := newPeerRequest(ctx, http.MethodGet, p.scheme, peer, path, query, p.getHeader, nil)
	if err != nil {
		return Response{}, fmt.Errorf("proxy: peer %s: %w", peer, err)
	}
	resp, err := p.transport.RoundTrip(hreq)
	if err != nil {
		return Response{}, fmt.Errorf("proxy: peer %s: %w", peer, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotFound {
		drain(resp.Body)
		return Response{}, fmt.Errorf("%w %d from peer %s", errStatus, resp.StatusCode, peer)
	}
	// A peer without the version answers 501, but one that fell back to
	// another (as sequins did) must not be believed, nor cached under
	// the version asked for.
	v := resp.Header.Get(hdrVersion)
	if v != "" && v != req.Version {
		drain(resp.Body)
		return Response{}, fmt.Errorf("%w: peer %s sent version %q for %q", errVersion, peer, v, req.Version)
	}
	body, err := readBody(resp, p.cfg.MaxBodyBytes)
	if err != nil {
		return Response{}, fmt.Errorf("proxy: peer %s: %w", peer, err)
	}
	return Response{
		Status:       resp.StatusCode,
		Body:         body,
		Version:      v,
		ContentType:  resp.Header.Get("Content-Type"),
		ETag:         resp.Header.Get("ETag"),
		LastModified: resp.Header.Get("Last-Modified"),
		Peer:         peer,
	}, nil
}

// batchBufs holds the buffers batch replies are read in.
var batchBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledBuf is the largest buffer batchBufs keeps.
const maxPooledBuf = 256 << 10

func putBatchBuf(bp *[]byte, b []byte) {
	if cap(b) <= maxPooledBuf {
		*bp = b[:0]
		batchBufs.Put(bp)
	}
}

// askBatch sends the attempts (two or more, of one db, version and raw)
// to peer as one POST /<db>/_batch?proxy=<version> and returns their
// answers, in order, appended to dst. A batch the peer refuses as a
// whole fails with errRefused.
func (p *Proxy) askBatch(ctx context.Context, peer string, attempts []*attempt, dst []batchItem) ([]batchItem, error) {
	head := &attempts[0].f.req
	// Not a pooled buffer: the transport may still read it after
	// RoundTrip returns (a peer may answer before reading it all).
	size := 4 + binary.MaxVarintLen64*(len(attempts)+1)
	for _, a := range attempts {
		size += len(a.f.req.Key)
	}
	body := appendBatchRequest(make([]byte, 0, size), attempts)
	path, query := batchTarget(head)
	hreq, err := newPeerRequest(ctx, http.MethodPost, p.scheme, peer, path, query, p.batchHeader, body)
	if err != nil {
		return nil, fmt.Errorf("proxy: peer %s: %w", peer, err)
	}
	resp, err := p.transport.RoundTrip(hreq)
	if err != nil {
		return nil, fmt.Errorf("proxy: peer %s: %w", peer, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		drain(resp.Body)
		err := fmt.Errorf("%w %d from peer %s for a batch of %d", errStatus, resp.StatusCode, peer, len(attempts))
		if refusedBatch(resp.StatusCode) {
			err = fmt.Errorf("%w: %w", errRefused, err)
		}
		return nil, err
	}
	if v := resp.Header.Get(hdrVersion); v != "" && v != head.Version {
		drain(resp.Body)
		return nil, fmt.Errorf("%w: peer %s sent version %q for %q", errVersion, peer, v, head.Version)
	}
	// Each value is at most MaxBodyBytes: the reply, at most that many
	// per key plus framing, and 1 KiB for its version and content type.
	limit := int64(1<<10+len(head.Version)) + int64(len(attempts))*(p.cfg.MaxBodyBytes+1+binary.MaxVarintLen64)
	rp := batchBufs.Get().(*[]byte)
	reply, err := readBodyInto((*rp)[:0], resp, limit)
	defer func() { putBatchBuf(rp, reply) }()
	if err != nil {
		return nil, fmt.Errorf("proxy: peer %s: %w", peer, err)
	}
	items, err := decodeBatchReply(dst, reply, len(attempts), peer, head.Version, p.cfg.MaxBodyBytes)
	if errors.Is(err, errMalformed) {
		err = fmt.Errorf("%w: %w", errRefused, err)
	}
	return items, err
}

// refusedBatch reports whether a batch answered with status may still
// succeed key by key: the peer cannot parse it or finds it too large
// (400, 413: older or stricter peers), does not take POST there (405),
// or failed it as a whole because one key's partition is not held (500).
func refusedBatch(status int) bool {
	switch status {
	case http.StatusBadRequest, http.StatusMethodNotAllowed, http.StatusRequestEntityTooLarge, http.StatusInternalServerError:
		return true
	}
	return false
}

// readBody reads resp's body whole, failing with ErrBodyTooLarge beyond
// limit bytes.
func readBody(resp *http.Response, limit int64) ([]byte, error) {
	if resp.ContentLength > limit {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrBodyTooLarge, resp.ContentLength, limit)
	}
	if resp.ContentLength >= 0 {
		b := make([]byte, resp.ContentLength)
		if _, err := io.ReadFull(resp.Body, b); err != nil {
			return nil, fmt.Errorf("read body: %w", err)
		}
		return b, nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrBodyTooLarge, limit)
	}
	return b, nil
}

// readBodyInto reads resp's body whole into b (from its length on),
// failing with ErrBodyTooLarge beyond limit bytes.
func readBodyInto(b []byte, resp *http.Response, limit int64) ([]byte, error) {
	if resp.ContentLength > limit {
		return b, fmt.Errorf("%w: %d bytes, limit %d", ErrBodyTooLarge, resp.ContentLength, limit)
	}
	if resp.ContentLength >= 0 {
		b = grow(b, int(resp.ContentLength))
		if _, err := io.ReadFull(resp.Body, b); err != nil {
			return b, fmt.Errorf("read body: %w", err)
		}
		return b, nil
	}
	// As io.ReadAll, but into b and with a limit.
	start := len(b)
	b = slices.Grow(b, 512)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // grow as append does
		}
		n, err := resp.Body.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if int64(len(b)-start) > limit {
			return b, fmt.Errorf("%w: more than %d bytes", ErrBodyTooLarge, limit)
		}
		switch {
		case err == io.EOF:
			return b, nil
		case err != nil:
			return b, fmt.Errorf("read body: %w", err)
		}
	}
}

// grow returns b resized to n bytes, reusing its array if it is large
// enough.
func grow(b []byte, n int) []byte {
	if cap(b) >= n {
		return b[:n]
	}
	return make([]byte, n)
}

// drain reads a little of a body we do not want, so that a short one
// leaves its connection reusable.
func drain(body io.Reader) {
	_, _ = io.CopyN(io.Discard, body, 4<<10)
}
