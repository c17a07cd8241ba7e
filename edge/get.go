package edge

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"
	"unsafe"

	"github.com/spangledb/spangle/node"
)

// Header names, canonical already, so that the hot path assigns map entries
// directly instead of canonicalising on every Set.
const (
	hdrVersion           = "X-Spangle-Version"
	hdrProxiedTo         = "X-Spangle-Proxied-To"
	hdrSequinsVersion    = "X-Sequins-Version"
	hdrSequinsProxiedTo  = "X-Sequins-Proxied-To"
	hdrETag              = "Etag" // http.CanonicalHeaderKey("ETag")
	hdrLastModified      = "Last-Modified"
	hdrCacheControl      = "Cache-Control"
	hdrContentType       = "Content-Type"
	hdrContentLength     = "Content-Length"
	hdrNoSniff           = "X-Content-Type-Options"
	hdrIfNoneMatch       = "If-None-Match"
	hdrIfModifiedSince   = "If-Modified-Since"
	hdrIfMatch           = "If-Match"
	hdrIfUnmodifiedSince = "If-Unmodified-Since"
	hdrAllow             = "Allow"
	hdrDB                = "X-Spangle-Db" // http.CanonicalHeaderKey("X-Spangle-DB")
	hdrSurrogateKey      = "Surrogate-Key"
	hdrCacheTag          = "Cache-Tag"
	hdrVary              = "Vary"
)

// Constant header values. Every response that uses one shares the slice;
// net/http only reads it, and len == cap, so an Add by a wrapping handler
// copies instead of writing into it.
var (
	valOctetStream = []string{"application/octet-stream"}
	valNoSniff     = []string{"nosniff"}
	valAllow       = []string{"GET, HEAD"}
	valJSON        = []string{"application/json"}
	valHTML        = []string{"text/html; charset=utf-8"}
	valText        = []string{"text/plain; charset=utf-8"}
	valZero        = []string{"0"}
	valNoStore     = []string{"no-store"}
	valVaryAccept  = []string{"Accept"}
)

// autoLengthMax is the largest body for which net/http (HTTP/1 and 2)
// computes Content-Length itself: a body written in one Write of at most
// this many bytes stays buffered until the handler returns, and is then
// sent with its length, from a per-connection buffer. Leaving those lengths
// to net/http saves a header map entry and two allocations per lookup.
const autoLengthMax = 2048

// headerSet holds the header values of one version's answers, built once
// per (version, modified, content type, cache control) and shared by every
// response with the same four; see the note on the constant values above.
type headerSet struct {
	version         string
	modified        time.Time
	contentType     string
	cacheControl    string
	negativeControl string

	versionVal         []string
	modifiedVal        []string
	contentTypeVal     []string
	cacheControlVal    []string // nil: no Cache-Control
	negativeControlVal []string // nil: no Cache-Control on 404s
	surrogateKeyVal    []string // "<db> <db>@<version>"
	cacheTagVal        []string // "<db>,<db>@<version>"
}

func (hs *headerSet) matches(res *node.Result) bool {
	return hs.version == res.Version && hs.contentType == res.ContentType &&
		hs.cacheControl == res.CacheControl && hs.negativeControl == res.NegativeCacheControl &&
		hs.modified.Equal(res.Modified)
}

// headersFor returns the header values for res, from h's cache when the
// version served last is res's.
func (h *dbHandle) headersFor(res *node.Result) *headerSet {
	if hs := h.headers.Load(); hs != nil && hs.matches(res) {
		return hs
	}
	hs := &headerSet{
		version:         res.Version,
		modified:        res.Modified,
		contentType:     res.ContentType,
		cacheControl:    res.CacheControl,
		negativeControl: res.NegativeCacheControl,
		versionVal:      []string{res.Version},
		surrogateKeyVal: []string{h.db + " " + h.db + "@" + res.Version},
		cacheTagVal:     []string{h.db + "," + h.db + "@" + res.Version},
	}
	if !res.Modified.IsZero() {
		hs.modifiedVal = []string{res.Modified.UTC().Format(http.TimeFormat)}
	}
	hs.contentTypeVal = valOctetStream
	if res.ContentType != "" {
		hs.contentTypeVal = []string{res.ContentType}
	}
	if res.CacheControl != "" {
		hs.cacheControlVal = []string{res.CacheControl}
	}
	if res.NegativeCacheControl != "" {
		hs.negativeControlVal = []string{res.NegativeCacheControl}
	}
	h.headers.Store(hs)
	return hs
}

// serveKey answers GET or HEAD /<db>/<key> for net/http.
func (s *Server) serveKey(w http.ResponseWriter, r *http.Request, db, key string) {
	serveKeyOn(s, httpSink{w, r}, db, key)
}

// serveKeyOn answers GET or HEAD /<db>/<key> on either server (sink.go).
// It is the hot path: no maps, no formatting, no logging on success, one
// write of the body.
func serveKeyOn[K sink](s *Server, k K, db, key string) {
	start := k.start()
	s.metrics.inflight.Inc()
	defer s.metrics.inflight.Dec()

	var proxy string
	var raw bool
	if q := k.rawQuery(); q != "" {
		if p, ok := unknownParam(q); ok {
			k.set(hdrCacheControl, valNoStore)
			writeTextOn(k, http.StatusBadRequest, "unknown query parameter "+strconv.Quote(p)+": lookups take proxy and raw only\n")
			s.metrics.lookup(db).observe(http.StatusBadRequest, time.Since(start))
			return
		}
		proxy = proxyParam(q)
		// Peers always get values as stored; clients may ask for them.
		raw = proxy != "" || rawParam(q)
		if proxy != "" && !peerAllowedOn(s, k) {
			s.metrics.lookup(db).observe(http.StatusForbidden, time.Since(start))
			return
		}
	}
	if rp := k.rawPath(); rp != "" && proxy == "" && redirectCanonicalOn(k, rp) {
		s.metrics.lookup(db).observe(http.StatusMovedPermanently, time.Since(start))
		return
	}
	dh, a, proxiedTo, hot, err := s.lookupKey(k.ctx(), db, key, proxy, raw)
	if err != nil {
		writeFailureOn(s, k, db, proxy, err, start, "edge: lookup failed")
		return
	}
	status := writeAnswerOn(s, k, dh, &a, proxiedTo)
	if hot {
		if rec := k.record(); rec != nil {
			rec.hot = true
		}
	}
	dh.observe(status, time.Since(start))
}

// lookupKey is the one lookup of a key both servers make (serveKeyOn):
// the answer to write for key of db, the peer that answered it
// (proxiedTo) and whether the node's answer cache held it (hot); or the
// backend's error.
func (s *Server) lookupKey(ctx context.Context, db, key, proxy string, raw bool) (dh *dbHandle, a answer, proxiedTo string, hot bool, err error) {
	// The key's bytes are the path string's, shared rather than copied: a
	// lookup only reads its key (partitioners, bbolt, the proxy's
	// requests, the answer cache's lookup; a cached key is copied), and a
	// string's memory is never written.
	res, err := s.backend.Get(ctx, db, unsafe.Slice(unsafe.StringData(key), len(key)), node.GetOptions{Version: proxy, Raw: raw})
	if err != nil {
		return nil, answer{}, "", false, err
	}
	dh = s.metrics.known(db)
	return dh, answerOf(dh, &res), res.ProxiedTo, res.Cached, nil
}

// answer is what a found or missing key's response is written from: a
// value, made per request.
type answer struct {
	hs    *headerSet
	value []byte // shared (node.Result.Value): never modified
	found bool
	// etag is the ETag header's value, of one element: the node's
	// (node.Result.ETag, shared) when it had it, else computed by
	// answerOf.
	etag []string
}

// answerOf returns the answer to write for res, a lookup of dh's db. A
// hit of the node's answer cache allocates nothing here; any other found
// value its ETag, hashed.
func answerOf(dh *dbHandle, res *node.Result) answer {
	a := answer{hs: dh.headersFor(res), value: res.Value, found: res.Found, etag: res.ETag}
	if a.found && len(a.etag) != 1 {
		ev := new(etagValue)
		tag := node.AppendETag(ev.buf[:0], a.value)
		ev.vals[0] = unsafe.String(unsafe.SliceData(tag), len(tag))
		a.etag = ev.vals[:]
	}
	return a
}

// writeAnswerOn writes a's response (proxiedTo: the peer that answered,
// if any) and returns its status. It does not modify a.
func writeAnswerOn[K sink](s *Server, k K, dh *dbHandle, a *answer, proxiedTo string) int {
	hs := a.hs
	if rec := k.record(); rec != nil {
		rec.db, rec.version, rec.proxiedTo, rec.keys = dh.db, hs.version, proxiedTo, 1
	}
	k.set(hdrVersion, hs.versionVal)
	if s.sequinsHeaders {
		k.set(hdrSequinsVersion, hs.versionVal)
	}
	k.set(hdrDB, dh.dbVal)
	if s.cacheTags {
		k.set(hdrSurrogateKey, hs.surrogateKeyVal)
		k.set(hdrCacheTag, hs.cacheTagVal)
	}
	if proxiedTo != "" {
		v := []string{proxiedTo}
		k.set(hdrProxiedTo, v)
		if s.sequinsHeaders {
			k.set(hdrSequinsProxiedTo, v)
		}
	}
	if !a.found {
		if hs.negativeControlVal != nil {
			k.set(hdrCacheControl, hs.negativeControlVal)
		}
		k.set(hdrContentLength, valZero)
		k.writeHeader(http.StatusNotFound)
		return http.StatusNotFound
	}

	etagVal := a.etag
	etag := unsafe.Slice(unsafe.StringData(etagVal[0]), len(etagVal[0]))
	gz := wantsGzipOn(s, k, len(a.value))
	if gz {
		// The gzip representation's own tag, and its header slice, in one
		// allocation.
		ev := new(etagValue)
		etag = gzipETag(append(ev.buf[:0], etag...))
		ev.vals[0] = unsafe.String(unsafe.SliceData(etag), len(etag))
		etagVal = ev.vals[:]
	}
	k.set(hdrETag, etagVal)
	if hs.modifiedVal != nil {
		k.set(hdrLastModified, hs.modifiedVal)
	}
	if status := precondition(k, etag, hs.modified); status != 0 {
		if status == http.StatusPreconditionFailed {
			// Not the representation: no cache may keep it in its place.
			k.set(hdrCacheControl, valNoStore)
			k.set(hdrContentLength, valZero)
		} else if hs.cacheControlVal != nil {
			k.set(hdrCacheControl, hs.cacheControlVal)
		}
		k.writeHeader(status)
		return status
	}
	if hs.cacheControlVal != nil {
		k.set(hdrCacheControl, hs.cacheControlVal)
	}
	k.set(hdrContentType, hs.contentTypeVal)
	k.set(hdrNoSniff, valNoSniff)
	if gz {
		// HEAD too: its Content-Length is the compressed one GET sends.
		g := gzipBytes(a.value)
		defer releaseGzip(g)
		k.set(hdrContentEncoding, valGzip)
		k.set(hdrContentLength, []string{strconv.Itoa(g.buf.Len())})
		k.writeHeader(http.StatusOK)
		if !k.head() {
			k.write(g.buf.Bytes())
		}
		return http.StatusOK
	}
	if k.head() || len(a.value) > autoLengthMax {
		k.set(hdrContentLength, []string{strconv.Itoa(len(a.value))})
	}
	k.writeHeader(http.StatusOK)
	if !k.head() && len(a.value) > 0 {
		k.writeShared(a.value)
	}
	return http.StatusOK
}

// etagValue holds an ETag header computed by the door (answerOf, or a
// gzip answer's: gzipETag adds 3 bytes): its bytes and the one-element
// value slice naming them, allocated together.
type etagValue struct {
	vals [1]string
	buf  [node.ETagLen + 3]byte
}

// fieldSource is a request's header fields: a sink, or reqFields.
type fieldSource interface {
	fields(name string) []string
}

// reqFields is net/http's request header as a fieldSource.
type reqFields http.Header

func (h reqFields) fields(name string) []string { return h[name] }

// precondition evaluates the request's conditional header fields (f) for
// a value with etag, of a version dated modified (zero: none), in the
// order of RFC 9110 §13.2.2, and returns the status they call for: 412
// when If-Match (strong comparison), or without it If-Unmodified-Since,
// is false; 304 when If-None-Match (weak comparison), or without it
// If-Modified-Since, is false; 0 to answer as asked. It is asked of 200s
// only: a response that would be another status ignores the conditions
// (§13.2.1).
func precondition[F fieldSource](f F, etag []byte, modified time.Time) int {
	if im := f.fields(hdrIfMatch); im != nil {
		if !anyLists(im, etag, ifMatch) {
			return http.StatusPreconditionFailed
		}
	} else if t, ok := fieldDate(f.fields(hdrIfUnmodifiedSince)); ok && !modified.IsZero() &&
		modified.Truncate(time.Second).After(t) {
		return http.StatusPreconditionFailed
	}
	if inm := f.fields(hdrIfNoneMatch); inm != nil {
		if anyLists(inm, etag, noneMatch) {
			return http.StatusNotModified
		}
		return 0
	}
	if t, ok := fieldDate(f.fields(hdrIfModifiedSince)); ok && !modified.IsZero() &&
		!modified.Truncate(time.Second).After(t) {
		return http.StatusNotModified
	}
	return 0
}

// fieldDate returns the HTTP-date of a field's lines v. A field that is
// absent, is not one valid date, or has more than one line (a list of
// dates) is to be ignored (RFC 9110 §13.1.3, §13.1.4): ok is false.
func fieldDate(v []string) (t time.Time, ok bool) {
	if len(v) != 1 {
		return time.Time{}, false
	}
	t, err := http.ParseTime(v[0])
	return t, err == nil
}

// anyLists reports whether any field line of an If-Match or
// If-None-Match lists etag, as match (ifMatch or noneMatch) compares.
func anyLists(fields []string, etag []byte, match func(string, []byte) bool) bool {
	for _, f := range fields {
		if match(f, etag) {
			return true
		}
	}
	return false
}

// writeFailure answers a failed batch per the wire-code table, for
// net/http (writeFailureOn).
func (s *Server) writeFailure(w http.ResponseWriter, r *http.Request, db, proxy string, err error, start time.Time, what string) {
	writeFailureOn(s, httpSink{w, r}, db, proxy, err, start, what)
}

// writeFailureOn answers a failed lookup or batch per the wire-code table
// (with the error's own text for the rows that say so), counts it, and
// logs it as what unless the table says it is quiet.
func writeFailureOn[K sink](s *Server, k K, db, proxy string, err error, start time.Time, what string) {
	ctx := k.ctx()
	row := wireCodeFor(ctx, err)
	status := row.status
	if proxy != "" {
		status = row.peer
	}
	if rec := k.record(); rec != nil {
		rec.db = db
	}
	var dh *dbHandle
	if dbKnown(err) {
		dh = s.metrics.known(db)
	} else {
		dh = s.metrics.lookup(db)
	}
	k.set(hdrCacheControl, valNoStore)
	if msg := row.message(err); msg != "" {
		writeTextOn(k, status, msg)
	} else {
		k.set(hdrContentLength, valZero)
		k.writeHeader(status)
	}
	elapsed := time.Since(start)
	dh.observe(status, elapsed)
	if !row.quiet {
		s.log.LogAttrs(ctx, row.level, what,
			slog.String("db", db), slog.Int("status", status), slog.String("proxy", proxy),
			slog.Duration("elapsed", elapsed), slog.Any("err", err))
	}
}
