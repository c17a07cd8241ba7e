package edge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/spangledb/spangle/edge/internal/batchwire"
	"github.com/spangledb/spangle/node"
)

// Defaults of the batch limits (Config and NATSConfig).
const (
	DefaultMaxBatchKeys  = 1000
	DefaultMaxBatchBytes = 1 << 20
)

// batchKey is the key segment of the batch path, POST /<db>/_batch. A GET
// of /<db>/_batch is still the lookup of the key "_batch".
const batchKey = "_batch"

var (
	valAllowBatch = []string{"GET, HEAD, POST"}
	valBatch      = []string{batchwire.ContentType}
)

// BatchBackend is what batch lookups need from a node beside Backend. A
// Backend that does not implement it answers batch lookups with 501.
// Implementations must be safe for concurrent use.
type BatchBackend interface {
	// GetMany looks keys up in db, all in one version, and returns that
	// version and one Result per key, in order. A missing key is a Result
	// with Found false. Errors are those of Backend.Get, for the whole
	// batch. The caller owns keys; GetMany must not keep them.
	GetMany(ctx context.Context, db string, keys [][]byte, opts node.GetOptions) (string, []node.Result, error)
}

// batchPath reports whether path is a batch path, /<db>/_batch, and returns
// its db.
func batchPath(path string) (string, bool) {
	rt, db, key := parsePath(path)
	return db, rt == routeKey && key == batchKey
}

// batchReplySize returns the encoded size of a batch reply.
func batchReplySize(version, contentType string, results []node.Result) int {
	size := batchwire.ReplyHeaderSize(version, contentType, len(results))
	for i := range results {
		if results[i].Found {
			size += batchwire.ItemSize(batchwire.Found, len(results[i].Value))
		} else {
			size++
		}
	}
	return size
}

// appendBatchReply appends the reply for results, all of version.
func appendBatchReply(dst []byte, version, contentType string, results []node.Result) []byte {
	dst = batchwire.AppendReplyHeader(dst, version, contentType, len(results))
	for i := range results {
		if results[i].Found {
			dst = batchwire.AppendItem(dst, batchwire.Found, results[i].Value)
		} else {
			dst = batchwire.AppendItem(dst, batchwire.Missing, nil)
		}
	}
	return dst
}

// batchContentType is the content type of a batch's values: that of the
// first value found (they share the db's, or its decoder's).
func batchContentType(results []node.Result) string {
	for i := range results {
		if results[i].Found {
			return results[i].ContentType
		}
	}
	return ""
}

// serveBatch answers POST /<db>/_batch: the body is a batch request
// (edge/BATCH.md), the answer a batch reply from one version, with
// X-Spangle-Version. Errors follow the wire-code table.
func (s *Server) serveBatch(w http.ResponseWriter, r *http.Request, db string) {
	start := time.Now()
	s.metrics.inflight.Inc()
	defer s.metrics.inflight.Dec()
	bb, ok := s.backend.(BatchBackend)
	if !ok {
		writeText(w, r, http.StatusNotImplemented, "batch lookups are not supported here\n")
		return
	}
	var proxy string
	if r.URL.RawQuery != "" {
		proxy = proxyParam(r.URL.RawQuery)
	}
	body, err := s.readBatch(w, r)
	if err != nil {
		s.writeBatchError(w, r, db, proxy, err, start)
		return
	}
	keys, err := batchwire.DecodeRequest(body, s.maxBatchKeys)
	if err != nil {
		s.writeBatchError(w, r, db, proxy, err, start)
		return
	}
	raw := proxy != "" || rawParam(r.URL.RawQuery)
	version, results, err := bb.GetMany(r.Context(), db, keys, node.GetOptions{Version: proxy, Raw: raw})
	if err != nil {
		s.writeBatchError(w, r, db, proxy, err, start)
		return
	}
	ct := batchContentType(results)
	reply := appendBatchReply(make([]byte, 0, batchReplySize(version, ct, results)), version, ct, results)
	h := w.Header()
	v := []string{version}
	h[hdrVersion] = v
	if s.sequinsHeaders {
		h[hdrSequinsVersion] = v
	}
	writeBody(w, r, http.StatusOK, valBatch, reply)
	s.metrics.known(db).observe(http.StatusOK, time.Since(start))
}

// readBatch reads a batch request's body, at most MaxBatchBytes.
func (s *Server) readBatch(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	limit := int64(s.maxBatchBytes)
	if r.ContentLength > limit {
		return nil, fmt.Errorf("%w: batch request of %d bytes, at most %d allowed", errTooLarge, r.ContentLength, limit)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, fmt.Errorf("%w: batch request over %d bytes", errTooLarge, limit)
	case err != nil:
		return nil, fmt.Errorf("%w: reading the request: %v", batchwire.ErrMalformed, err)
	}
	return body, nil
}

// writeBatchError answers a failed batch lookup per the wire-code table,
// with the error's own text for the rows that say so, and logs it.
func (s *Server) writeBatchError(w http.ResponseWriter, r *http.Request, db, proxy string, err error, start time.Time) {
	s.writeFailure(w, r, db, proxy, err, start, "edge: batch lookup failed")
}

// statusText is a status code as a header value.
func statusText(status int) string { return strconv.Itoa(status) }
