package edge

import (
	"bytes"
	"net/http"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
)

// Values of at least Config.GzipMinBytes are sent gzip-compressed to
// clients that accept it: large JSON or text values shrink several times,
// while small ones would cost more CPU than the bytes they save. Such
// answers vary by Accept-Encoding, and the compressed one has its own
// entity tag (the value's, with "-gz" before the closing quote), as RFC
// 9110 §8.8.3 asks of a different representation.

const (
	hdrAcceptEncoding  = "Accept-Encoding"
	hdrContentEncoding = "Content-Encoding"
)

var (
	valVaryAcceptEncoding = []string{"Accept-Encoding"}
	valGzip               = []string{"gzip"}
)

// gzipState is a pooled writer and its output buffer.
type gzipState struct {
	buf bytes.Buffer
	w   *gzip.Writer
}

var gzipPool = sync.Pool{New: func() any {
	g := &gzipState{}
	g.w, _ = gzip.NewWriterLevel(&g.buf, gzip.BestSpeed) // a valid level: no error
	return g
}}

// gzipBytes compresses value into a pooled state; the caller puts it back
// with releaseGzip once the bytes are written.
func gzipBytes(value []byte) *gzipState {
	g := gzipPool.Get().(*gzipState)
	g.buf.Reset()
	g.w.Reset(&g.buf)
	g.w.Write(value) //nolint:errcheck // writes to a bytes.Buffer do not fail
	g.w.Close()      //nolint:errcheck // idem
	return g
}

// releaseGzip returns g to the pool, unless its buffer grew large.
func releaseGzip(g *gzipState) {
	if g.buf.Cap() <= 1<<20 {
		gzipPool.Put(g)
	}
}

// acceptsGzip reports whether Accept-Encoding field lines accept gzip: a
// "gzip" or "*" coding whose q is not zero.
func acceptsGzip(fields []string) bool {
	for _, f := range fields {
		for part := range strings.SplitSeq(f, ",") {
			coding, params, _ := strings.Cut(part, ";")
			coding = strings.TrimSpace(coding)
			if !strings.EqualFold(coding, "gzip") && coding != "*" {
				continue
			}
			q := strings.ReplaceAll(strings.ToLower(params), " ", "")
			if strings.HasPrefix(q, "q=0") && strings.Trim(q[3:], ".0") == "" {
				continue // q=0, q=0.0, q=0.000: not acceptable
			}
			return true
		}
	}
	return false
}

// gzipETag turns a value's entity tag into its gzip representation's.
func gzipETag(etag []byte) []byte {
	return append(append(etag[:len(etag)-1:len(etag)-1], "-gz"...), '"')
}

// wantsGzip reports whether r's answer of a value of n bytes is to be
// compressed, and sets Vary when the answer depends on Accept-Encoding.
func (s *Server) wantsGzip(w http.ResponseWriter, r *http.Request, n int) bool {
	return wantsGzipOn(s, httpSink{w, r}, n)
}

// wantsGzipOn is wantsGzip on either server (sink.go).
func wantsGzipOn[K sink](s *Server, k K, n int) bool {
	if s.gzipMin <= 0 || n < s.gzipMin {
		return false
	}
	k.set(hdrVary, valVaryAcceptEncoding)
	ae := k.fields(hdrAcceptEncoding)
	// Peers (?proxy=) get values as stored: Go's transport would ask for
	// gzip on its own and undo it.
	// HEAD as GET: the same Content-Length, ETag and Content-Encoding.
	return ae != nil && acceptsGzip(ae) &&
		(k.rawQuery() == "" || proxyParam(k.rawQuery()) == "")
}
