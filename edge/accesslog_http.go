package edge

import (
	"unsafe"

	"github.com/valyala/fasthttp"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// loggedWriter is the ResponseWriter of a request whose line is logged:
// it notes the status and the bytes written, and carries the record the
// handlers fill (accessNote). Pooled: a logged request allocates nothing
// for it.
type loggedWriter struct {
	http.ResponseWriter
	rec   accessRecord
	wrote bool // a final status was written
}

var loggedWriters = sync.Pool{New: func() any { return new(loggedWriter) }}

func (w *loggedWriter) WriteHeader(status int) {
	if !w.wrote && status >= 200 {
		w.rec.status, w.wrote = status, true
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *loggedWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.rec.status, w.wrote = http.StatusOK, true
	}
	n, err := w.ResponseWriter.Write(p)
	w.rec.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection's writer
// (Flush, deadlines).
func (w *loggedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// accessNote returns the record of the request w answers, nil when it
// is not logged. Handlers set what only they know (db, version, hot,
// proxiedTo, keys) on it.
func accessNote(w http.ResponseWriter) *accessRecord {
	if lw, ok := w.(*loggedWriter); ok {
		return &lw.rec
	}
	return nil
}

// noteAnswer records an answer of version (proxiedTo: the peer that
// answered, if any) to a request for keys of db in w's record, if
// logged.
func noteAnswer(w http.ResponseWriter, db, version, proxiedTo string, keys int) {
	if rec := accessNote(w); rec != nil {
		rec.db, rec.version, rec.proxiedTo, rec.keys = db, version, proxiedTo, keys
	}
}

// noteDB records the db a request named in w's record, if logged.
func noteDB(w http.ResponseWriter, db string) {
	if rec := accessNote(w); rec != nil {
		rec.db = db
	}
}

// Handler returns h with every request logged: for the doors that are
// not a Server (spangle serve's admin API on the debug listener).
func (l *AccessLog) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.serve(h, w, r)
	})
}

// serve serves r with h through a loggedWriter and logs the line, also
// when h panics (then re-panicking; a Server recovers inside h).
func (l *AccessLog) serve(h http.Handler, w http.ResponseWriter, r *http.Request) {
	lw := loggedWriters.Get().(*loggedWriter)
	lw.ResponseWriter = w
	lw.rec.start = time.Now()
	defer func() {
		l.logHTTP(&lw.rec, r)
		*lw = loggedWriter{}
		loggedWriters.Put(lw)
	}()
	h.ServeHTTP(lw, r)
}

// logHTTP completes rec from r and writes its line.
func (l *AccessLog) logHTTP(rec *accessRecord, r *http.Request) {
	rec.elapsed = time.Since(rec.start)
	if rec.status == 0 {
		// Nothing written: net/http answers 200 with an empty body.
		rec.status = http.StatusOK
	}
	rec.remote = r.RemoteAddr
	rec.client = l.clientOf(r.RemoteAddr, r.Header["X-Forwarded-For"])
	rec.method, rec.target, rec.proto = r.Method, r.RequestURI, r.Proto
	if rec.target == "" { // a request made in process
		rec.target = r.URL.RequestURI()
	}
	rec.tls = r.TLS != nil || handedTLS(r.Context())
	rec.userAgent = headerValue(r.Header, "User-Agent")
	rec.referer = headerValue(r.Header, "Referer")
	l.write(rec)
}

// logFast completes rec, a fast-path request's record (fast.go), from c
// and writes its line: what serve does for net/http's. The line is
// formatted before c is reused.
func (l *AccessLog) logFast(c *fasthttp.RequestCtx, rec *accessRecord) {
	rec.elapsed = time.Since(rec.start)
	if rec.status == 0 {
		rec.status = c.Response.StatusCode()
	}
	h := &c.Request.Header
	rec.remote = c.RemoteAddr().String()
	var xff []string
	if len(l.trusted) > 0 {
		xff = fastSink{c: c}.fields("X-Forwarded-For")
	}
	rec.client = l.clientOf(rec.remote, xff)
	rec.method, rec.target, rec.proto = bytesString(h.Method()), bytesString(h.RequestURI()), "HTTP/1.1"
	rec.tls = c.IsTLS()
	rec.userAgent, rec.referer = bytesString(h.UserAgent()), bytesString(h.Referer())
	l.write(rec)
}

// bytesString is b as a string sharing its memory: for bytes that are
// not modified while the string is used.
func bytesString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// headerValue is h's first value of the canonical key, "" without one.
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// clientOf returns a request's client address: its peer's, unless the peer is a
// trusted proxy; then the right-most address of X-Forwarded-For that is
// not a trusted proxy (the left-most when all are), stopping at the first
// entry that is no address. It is always an address as netip writes it,
// or the peer's as net/http gives it. remote is the peer's address
// (host:port), xff the request's X-Forwarded-For field lines.
func (l *AccessLog) clientOf(remote string, xff []string) string {
	host := remote
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if len(l.trusted) == 0 {
		return host
	}
	peer, err := netip.ParseAddr(host)
	if err != nil || !l.trustedAddr(peer) {
		return host
	}
	client := peer
	for i := len(xff) - 1; i >= 0; i-- {
		f := xff[i]
		for f != "" {
			var hop string
			if j := strings.LastIndexByte(f, ','); j >= 0 {
				f, hop = f[:j], f[j+1:]
			} else {
				f, hop = "", f
			}
			a, err := netip.ParseAddr(strings.TrimSpace(hop))
			if err != nil {
				return client.String()
			}
			client = a.Unmap()
			if !l.trustedAddr(client) {
				return client.String()
			}
		}
	}
	return client.String()
}

func (l *AccessLog) trustedAddr(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range l.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
