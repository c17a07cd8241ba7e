package edge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/batchwire"
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

// BatchBackend is what batch lookups need from a node beside Backend
// (Config.Batch; without one, batch lookups are 501). *node.Node
// implements it. Implementations must be safe for concurrent use.
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

// batchBufs holds the buffers of batch requests (batchBuf), so that a
// busy peer reads, decodes and answers batches without allocating them.
var batchBufs = sync.Pool{New: func() any { return new(batchBuf) }}

// maxPooledBatch is the largest buffer batchBufs keeps.
const maxPooledBatch = 256 << 10

// batchBuf is the memory of one batch request: its body, its keys (which
// alias body) and its reply. It is used by one request at a time.
type batchBuf struct {
	body  []byte
	keys  [][]byte
	reply []byte
}

// put returns bb to batchBufs, dropping the buffers too large to keep.
// The keys are cleared: they point into body.
func (bb *batchBuf) put() {
	if cap(bb.body) > maxPooledBatch {
		bb.body = nil
	}
	if cap(bb.reply) > maxPooledBatch {
		bb.reply = nil
	}
	if cap(bb.keys) > maxPooledBatch/8 {
		bb.keys = nil
	}
	clear(bb.keys)
	bb.body, bb.keys, bb.reply = bb.body[:0], bb.keys[:0], bb.reply[:0]
	batchBufs.Put(bb)
}

// serveBatch answers POST /<db>/_batch: the body is a batch request
// (edge/BATCH.md), the answer a batch reply from one version, with
// X-Spangle-Version. Errors follow the wire-code table. The request's
// body, keys and reply live in a pooled batchBuf: BatchBackend.GetMany
// does not keep keys, and ResponseWriter.Write does not keep the reply.
func (s *Server) serveBatch(w http.ResponseWriter, r *http.Request, db string) {
	start := time.Now()
	s.metrics.inflight.Inc()
	defer s.metrics.inflight.Dec()
	be := s.batch
	if be == nil {
		writeText(w, r, http.StatusNotImplemented, "batch lookups are not supported here\n")
		return
	}
	var proxy string
	if r.URL.RawQuery != "" {
		proxy = proxyParam(r.URL.RawQuery)
		if proxy != "" && !s.peerAllowed(w, r) {
			return
		}
	}
	limit := int64(s.maxBatchBytes)
	if r.ContentLength > limit {
		s.writeBatchError(w, r, db, proxy, fmt.Errorf("%w: batch request of %d bytes, at most %d allowed", errTooLarge, r.ContentLength, limit), start)
		return
	}
	bb := batchBufs.Get().(*batchBuf)
	defer bb.put()
	// The body takes room in the node-wide budget as its bytes arrive,
	// never for what it announces: a client that announces much and
	// sends little holds only what it sent.
	var held int64
	defer func() { s.batchBytes.Release(held) }()
	var err error
	if bb.body, err = s.readBatch(bb.body[:0], &held, w, r); err != nil {
		if errors.Is(err, errBatchBusy) {
			s.batchBusy(w, r, db, start)
			return
		}
		s.writeBatchError(w, r, db, proxy, err, start)
		return
	}
	if bb.keys, err = batchwire.AppendRequestKeys(bb.keys[:0], bb.body, s.maxBatchKeys); err != nil {
		s.writeBatchError(w, r, db, proxy, err, start)
		return
	}
	raw := proxy != "" || rawParam(r.URL.RawQuery)
	// The reply's room in the budget: a little first, more when the
	// values outgrow it (they are read again then), so that many small
	// replies share the budget and a few large ones cannot exceed it.
	var version string
	var results []node.Result
	for reserve := min(int64(s.maxReplyBytes), replyReserveStart); ; reserve = min(4*reserve, int64(s.maxReplyBytes)) {
		if !s.acquireBatch(r.Context(), 2*reserve) {
			s.batchBusy(w, r, db, start)
			return
		}
		version, results, err = be.GetMany(r.Context(), db, bb.keys, node.GetOptions{Version: proxy, Raw: raw, MaxBytes: int(reserve)})
		if errors.Is(err, node.ErrTooLarge) && reserve < int64(s.maxReplyBytes) {
			s.batchBytes.Release(2 * reserve)
			continue
		}
		defer s.batchBytes.Release(2 * reserve)
		break
	}
	if err != nil {
		s.writeBatchError(w, r, db, proxy, err, start)
		return
	}
	noteAnswer(w, db, version, "", len(bb.keys))
	ct := batchContentType(results)
	bb.reply = appendBatchReply(slices.Grow(bb.reply[:0], batchReplySize(version, ct, results)), version, ct, results)
	// The header values of the version and the length in two allocations:
	// one string holding both, one slice for both values.
	var digits [20]byte
	both := version + string(strconv.AppendInt(digits[:0], int64(len(bb.reply)), 10))
	vals := []string{both[:len(version)], both[len(version):]}
	v := vals[0:1:1]
	h := w.Header()
	h[hdrVersion] = v
	if s.sequinsHeaders {
		h[hdrSequinsVersion] = v
	}
	h[hdrContentType] = valBatch
	h[hdrNoSniff] = valNoSniff
	h[hdrContentLength] = vals[1:2:2]
	w.WriteHeader(http.StatusOK)
	w.Write(bb.reply) //nolint:errcheck // the client went away; nothing to do
	s.metrics.known(db).observe(http.StatusOK, time.Since(start))
}

// batchBusy answers 503 with Retry-After: the node-wide budget of batch
// bytes in flight stayed full for BatchWait.
func (s *Server) batchBusy(w http.ResponseWriter, r *http.Request, db string, start time.Time) {
	s.metrics.batchRejected.Inc()
	w.Header()["Retry-After"] = valRetryAfter
	writeText(w, r, http.StatusServiceUnavailable, "too many batch bytes in flight; retry\n")
	s.metrics.known(db).observe(http.StatusServiceUnavailable, time.Since(start))
}

// readBatch reads a batch request's body, at most MaxBatchBytes, into
// dst (from its length on; its array is reused when large enough) and
// returns it. Each read's bytes take room in the batch budget once they
// have arrived (added to *held, which the caller releases), waiting as
// acquireBatch does (errBatchBusy when none comes). The buffer grows with
// what arrives, never with what the request announces: a client that
// announces a large body and stalls holds neither memory nor budget.
func (s *Server) readBatch(dst []byte, held *int64, w http.ResponseWriter, r *http.Request) ([]byte, error) {
	limit := int64(s.maxBatchBytes)
	body := http.MaxBytesReader(w, r.Body, limit)
	for {
		if len(dst) == cap(dst) {
			dst = slices.Grow(dst, bytes.MinRead)
		}
		n, err := body.Read(dst[len(dst):cap(dst)])
		if n > 0 {
			if !s.acquireBatch(r.Context(), int64(n)) {
				return dst, errBatchBusy
			}
			*held += int64(n)
			dst = dst[:len(dst)+n]
		}
		var tooBig *http.MaxBytesError
		switch {
		case err == io.EOF:
			return dst, nil
		case errors.As(err, &tooBig):
			return dst, fmt.Errorf("%w: batch request over %d bytes", errTooLarge, limit)
		case err != nil:
			return dst, fmt.Errorf("%w: reading the request: %v", batchwire.ErrMalformed, err)
		}
	}
}

// errBatchBusy is readBatch's error when the budget had no room for the
// bytes that arrived.
var errBatchBusy = errors.New("edge: too many batch bytes in flight")

// acquireBatch takes weight bytes of the batch budget, waiting at most
// BatchWait (or until ctx ends) for room.
func (s *Server) acquireBatch(ctx context.Context, weight int64) bool {
	if s.batchBytes.TryAcquire(weight) {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, s.batchWait)
	defer cancel()
	return s.batchBytes.Acquire(ctx, weight) == nil
}

// replyReserveStart is the first reservation of a batch reply's room in
// the budget (twice this: values and encoding).
const replyReserveStart = 64 << 10

// valRetryAfter is the Retry-After of a batch refused for lack of room.
var valRetryAfter = []string{"1"}

// writeBatchError answers a failed batch lookup per the wire-code table,
// with the error's own text for the rows that say so, and logs it.
func (s *Server) writeBatchError(w http.ResponseWriter, r *http.Request, db, proxy string, err error, start time.Time) {
	s.writeFailure(w, r, db, proxy, err, start, "edge: batch lookup failed")
}

// statusText is a status code as a header value.
func statusText(status int) string { return strconv.Itoa(status) }
