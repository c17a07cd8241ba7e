package edge

import (
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

// serveKey answers GET or HEAD /<db>/<key>. It is the hot path: no maps,
// no formatting, no logging on success, one write of the body.
func (s *Server) serveKey(w http.ResponseWriter, r *http.Request, db, key string) {
	start := requestStart(w)
	s.metrics.inflight.Inc()
	defer s.metrics.inflight.Dec()

	var proxy string
	var raw bool
	if r.URL.RawQuery != "" {
		if p, ok := unknownParam(r.URL.RawQuery); ok {
			w.Header()[hdrCacheControl] = valNoStore
			writeText(w, r, http.StatusBadRequest, "unknown query parameter "+strconv.Quote(p)+": lookups take proxy and raw only\n")
			s.metrics.lookup(db).observe(http.StatusBadRequest, time.Since(start))
			return
		}
		proxy = proxyParam(r.URL.RawQuery)
		// Peers always get values as stored; clients may ask for them.
		raw = proxy != "" || rawParam(r.URL.RawQuery)
		if proxy != "" && !s.peerAllowed(w, r) {
			s.metrics.lookup(db).observe(http.StatusForbidden, time.Since(start))
			return
		}
	}
	if r.URL.RawPath != "" && proxy == "" && redirectCanonical(w, r) {
		s.metrics.lookup(db).observe(http.StatusMovedPermanently, time.Since(start))
		return
	}
	if s.hot != nil && proxy == "" {
		// A db without a handle has had no answer, so nothing cached.
		if dh, ok := s.metrics.handle(db); ok {
			if a, ok := s.hot.get(dh, key, raw); ok {
				status := s.writeAnswer(w, r, dh, a, "")
				noteHot(w)
				dh.observe(status, time.Since(start))
				return
			}
		}
	}
	var epoch uint64
	if s.hot != nil {
		epoch = s.hot.epoch.Load()
	}
	// The key's bytes are the path string's, shared rather than copied: a
	// lookup only reads its key (partitioners, bbolt, the proxy's
	// requests), and a string's memory is never written.
	res, err := s.backend.Get(r.Context(), db, unsafe.Slice(unsafe.StringData(key), len(key)), node.GetOptions{Version: proxy, Raw: raw})
	if err != nil {
		s.writeError(w, r, db, proxy, err, start)
		return
	}
	dh := s.metrics.known(db)
	a := answerOf(dh, &res)
	status := s.writeAnswer(w, r, dh, a, res.ProxiedTo)
	dh.observe(status, time.Since(start))
	if s.hot != nil && proxy == "" && res.ProxiedTo == "" && dh != s.metrics.unknown && s.hot.admit(key) {
		s.hot.put(dh, res.Version, key, raw, a, epoch)
	}
}

// writeAnswer writes a's response (proxiedTo: the peer that answered, if
// any) and returns its status. It does not modify a.
func (s *Server) writeAnswer(w http.ResponseWriter, r *http.Request, dh *dbHandle, a *answer, proxiedTo string) int {
	hs := a.hs
	noteAnswer(w, dh.db, hs.version, proxiedTo, 1)
	h := w.Header()
	h[hdrVersion] = hs.versionVal
	if s.sequinsHeaders {
		h[hdrSequinsVersion] = hs.versionVal
	}
	h[hdrDB] = dh.dbVal
	if s.cacheTags {
		h[hdrSurrogateKey] = hs.surrogateKeyVal
		h[hdrCacheTag] = hs.cacheTagVal
	}
	if proxiedTo != "" {
		v := []string{proxiedTo}
		h[hdrProxiedTo] = v
		if s.sequinsHeaders {
			h[hdrSequinsProxiedTo] = v
		}
	}
	if !a.found {
		if hs.negativeControlVal != nil {
			h[hdrCacheControl] = hs.negativeControlVal
		}
		h[hdrContentLength] = valZero
		w.WriteHeader(http.StatusNotFound)
		return http.StatusNotFound
	}

	etag, etagVal := a.etag[:], a.etagVal[:]
	gz := s.wantsGzip(r, h, len(a.value))
	if gz {
		// The gzip representation's own tag, and its header slice, in one
		// allocation.
		ev := new(etagValue)
		etag = gzipETag(append(ev.buf[:0], etag...))
		ev.vals[0] = unsafe.String(unsafe.SliceData(etag), len(etag))
		etagVal = ev.vals[:]
	}
	h[hdrETag] = etagVal
	if hs.modifiedVal != nil {
		h[hdrLastModified] = hs.modifiedVal
	}
	if status := precondition(r, etag, hs.modified); status != 0 {
		if status == http.StatusPreconditionFailed {
			// Not the representation: no cache may keep it in its place.
			h[hdrCacheControl] = valNoStore
			h[hdrContentLength] = valZero
		} else if hs.cacheControlVal != nil {
			h[hdrCacheControl] = hs.cacheControlVal
		}
		w.WriteHeader(status)
		return status
	}
	if hs.cacheControlVal != nil {
		h[hdrCacheControl] = hs.cacheControlVal
	}
	h[hdrContentType] = hs.contentTypeVal
	h[hdrNoSniff] = valNoSniff
	if gz {
		// HEAD too: its Content-Length is the compressed one GET sends.
		g := gzipBytes(a.value)
		defer releaseGzip(g)
		h[hdrContentEncoding] = valGzip
		h[hdrContentLength] = []string{strconv.Itoa(g.buf.Len())}
		w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			w.Write(g.buf.Bytes()) //nolint:errcheck // the client went away; nothing to do
		}
		return http.StatusOK
	}
	if r.Method == http.MethodHead || len(a.value) > autoLengthMax {
		h[hdrContentLength] = []string{strconv.Itoa(len(a.value))}
	}
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead && len(a.value) > 0 {
		w.Write(a.value) //nolint:errcheck // the client went away; nothing to do
	}
	return http.StatusOK
}

// etagValue holds a gzip answer's ETag header: its bytes (gzipETag adds
// 3) and the one-element value slice naming them, allocated together.
type etagValue struct {
	vals [1]string
	buf  [etagLen + 3]byte
}

// precondition evaluates r's conditional header fields for a value with
// etag, of a version dated modified (zero: none), in the order of RFC
// 9110 §13.2.2, and returns the status they call for: 412 when If-Match
// (strong comparison), or without it If-Unmodified-Since, is false; 304
// when If-None-Match (weak comparison), or without it If-Modified-Since,
// is false; 0 to answer as asked. It is asked of 200s only: a response
// that would be another status ignores the conditions (§13.2.1).
func precondition(r *http.Request, etag []byte, modified time.Time) int {
	h := r.Header
	if im, ok := h[hdrIfMatch]; ok {
		if !anyLists(im, etag, ifMatch) {
			return http.StatusPreconditionFailed
		}
	} else if t, ok := fieldDate(h, hdrIfUnmodifiedSince); ok && !modified.IsZero() &&
		modified.Truncate(time.Second).After(t) {
		return http.StatusPreconditionFailed
	}
	if inm, ok := h[hdrIfNoneMatch]; ok {
		if anyLists(inm, etag, noneMatch) {
			return http.StatusNotModified
		}
		return 0
	}
	if t, ok := fieldDate(h, hdrIfModifiedSince); ok && !modified.IsZero() &&
		!modified.Truncate(time.Second).After(t) {
		return http.StatusNotModified
	}
	return 0
}

// fieldDate returns the HTTP-date of h's field name. A field that is
// absent, is not one valid date, or has more than one line (a list of
// dates) is to be ignored (RFC 9110 §13.1.3, §13.1.4): ok is false.
func fieldDate(h http.Header, name string) (t time.Time, ok bool) {
	v := h[name]
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

// writeError answers a failed lookup per the wire-code table, logs it as
// the table says and counts it.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, db, proxy string, err error, start time.Time) {
	s.writeFailure(w, r, db, proxy, err, start, "edge: lookup failed")
}

// writeFailure answers a failed lookup or batch per the wire-code table
// (with the error's own text for the rows that say so), counts it, and
// logs it as what unless the table says it is quiet.
func (s *Server) writeFailure(w http.ResponseWriter, r *http.Request, db, proxy string, err error, start time.Time, what string) {
	row := lookupWireCode(r, err)
	status := row.status
	if proxy != "" {
		status = row.peer
	}
	noteDB(w, db)
	var dh *dbHandle
	if dbKnown(err) {
		dh = s.metrics.known(db)
	} else {
		dh = s.metrics.lookup(db)
	}
	w.Header()[hdrCacheControl] = valNoStore
	if msg := row.message(err); msg != "" {
		writeText(w, r, status, msg)
	} else {
		w.Header()[hdrContentLength] = valZero
		w.WriteHeader(status)
	}
	elapsed := time.Since(start)
	dh.observe(status, elapsed)
	if !row.quiet {
		s.log.LogAttrs(r.Context(), row.level, what,
			slog.String("db", db), slog.Int("status", status), slog.String("proxy", proxy),
			slog.Duration("elapsed", elapsed), slog.Any("err", err))
	}
}
