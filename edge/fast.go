package edge

import (
	"bufio"
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/valyala/fasthttp"
	"golang.org/x/net/http/httpguts"
)

// The HTTP/1.1 fast path (issue 36). net/http's own work was about three
// quarters of a GET's CPU (a write per answer, parsing, header maps
// cloned and sorted, three deadlines), so HTTP/1.1 connections are
// served by github.com/valyala/fasthttp — a well-kept HTTP/1.1 server
// made for this, with a parser fuzzed upstream, pooled buffers and
// pipelined answers written together — rather than by a parser written
// here. It answers key GETs and HEADs only, through the same core as
// net/http (serveKeyOn, sink.go). Any other request is handed to
// net/http with its connection (handOver), so that listings, batches,
// status pages, metrics, peer copies and anything unusual are answered
// exactly as before, by the same code; the connection stays with
// net/http from then on. fast_listen.go dispatches connections between
// the two servers.

// fastSink is the fast path's request and response (sink.go).
type fastSink struct {
	c      *fasthttp.RequestCtx
	base   context.Context // the connection's goneWatch
	query  string
	raw    string // the escaped path when net/url would keep it (url.URL.RawPath)
	rec    *accessRecord
	isHead bool
	began  time.Time
	// noConds says the request has no field whose name begins with
	// "If-" (badFraming read every name): fields of those names are nil
	// without a lookup (four per answer, 0.15 µs in a profile).
	noConds bool
}

func (k fastSink) ctx() context.Context  { return k.base }
func (k fastSink) head() bool            { return k.isHead }
func (k fastSink) rawQuery() string      { return k.query }
func (k fastSink) rawPath() string       { return k.raw }
func (k fastSink) record() *accessRecord { return k.rec }
func (k fastSink) start() time.Time      { return k.began }

func (k fastSink) fields(name string) []string {
	if k.noConds && strings.HasPrefix(name, "If-") {
		return nil
	}
	h := &k.c.Request.Header
	if h.Peek(name) == nil {
		return nil // the common case: no allocation
	}
	var v []string
	for _, b := range h.PeekAll(name) {
		v = append(v, string(b))
	}
	return v
}

func (k fastSink) set(name string, v []string) {
	k.c.Response.Header.SetCanonical(unsafe.Slice(unsafe.StringData(name), len(name)),
		unsafe.Slice(unsafe.StringData(v[0]), len(v[0])))
}

func (k fastSink) writeHeader(status int) {
	k.c.Response.SetStatusCode(status)
	if k.rec != nil {
		k.rec.status = status
	}
}

func (k fastSink) write(p []byte) {
	// Copied: the response is written after the handler returns, and p
	// may be a buffer the caller reuses.
	k.c.Response.AppendBody(p)
	if k.rec != nil {
		k.rec.bytes += int64(len(p))
	}
}

func (k fastSink) writeShared(p []byte) {
	// Not copied: a node's value is never modified (node.Result.Value),
	// and the response holds it until it is written.
	k.c.Response.SetBodyRaw(p)
	if k.rec != nil {
		k.rec.bytes += int64(len(p))
	}
}

// serveFast is the fast path's handler: key GETs and HEADs it answers;
// every other request it hands to net/http with the connection.
func (s *Server) serveFast(c *fasthttp.RequestCtx) {
	var rec *accessRecord // set for a logged lookup
	defer func() {
		if p := recover(); p != nil {
			s.panicked(c, rec, p)
		}
		if rec != nil {
			s.alog.logFast(c, rec) // after the recovery: a panic's line says 500
		}
	}()
	msg, conds := badFraming(c.Request.Header.RawHeaders())
	if msg != "" {
		s.refuseFast(c, msg)
		return
	}
	pc := asPrefixConn(c.Conn())
	k, db, key, ok := s.fastRoute(c)
	if !ok || pc == nil {
		s.handOver(c, pc)
		return
	}
	k.noConds = !conds
	// fasthttp read the clock just before calling the handler: its time
	// is the request's start (a clock read costs 100-200 ns on some
	// virtual machines).
	k.base, k.began = &pc.gone, c.Time()
	setDate(c, k.began)
	defer pc.gone.release()
	if s.alog != nil {
		rec = &accessRecord{start: k.began}
		k.rec = rec
	}
	serveKeyOn(s, k, db, key)
	if s.closingDoors() {
		c.SetConnectionClose() // Shutdown drains this connection
	}
}

// fastRoute returns the sink, db and key of c's request when the fast
// path answers it: a GET or HEAD in HTTP/1.1 of a key, with an
// origin-form target and a Host net/http accepts. ok is false for any
// other request, which net/http answers.
func (s *Server) fastRoute(c *fasthttp.RequestCtx) (k fastSink, db, key string, ok bool) {
	h := &c.Request.Header
	m := h.Method()
	head := string(m) == http.MethodHead
	if string(m) != http.MethodGet && !head || string(h.Protocol()) != "HTTP/1.1" {
		return k, "", "", false
	}
	uri := h.RequestURI()
	if len(uri) == 0 || uri[0] != '/' || !httpguts.ValidHostHeader(string(h.Host())) {
		return k, "", "", false
	}
	pct := false
	for _, b := range uri {
		if b < 0x20 || b == 0x7f {
			return k, "", "", false // net/url refuses it: net/http answers 400
		}
		pct = pct || b == '%'
	}
	if l := h.ContentLength(); l != 0 && l != -2 {
		return k, "", "", false // a body: net/http reads it
	}
	k = fastSink{c: c, base: s.fastCtx, isHead: head}
	var path string
	if pct {
		// As net/http reads it, so that a key and its canonical
		// redirect are the same.
		u, err := url.ParseRequestURI(string(uri))
		if err != nil {
			return k, "", "", false
		}
		path, k.raw, k.query = u.Path, u.RawPath, u.RawQuery
	} else {
		p, q, _ := bytes.Cut(uri, []byte{'?'})
		path, k.query = string(p), string(q) // the key outlives the request in caches
	}
	rt, db, key := parsePath(path)
	if rt != routeKey {
		return k, "", "", false
	}
	return k, db, key, true
}

// fasthttp writes its own Date from a clock kept by a goroutine of its
// own that never ends (fastConfig turns it off), and drops a Date set
// like any other field; one it parsed it keeps. So the Date of a second
// is parsed once into a header that holds only it (and the server's
// settings: no default Date, Server or Content-Type), copied into each
// response before anything else is set.
type dateHeader struct {
	sec int64
	h   fasthttp.ResponseHeader
}

var dateHeaders atomic.Pointer[dateHeader]

// setDate starts c's response with the Date field of now.
func setDate(c *fasthttp.RequestCtx, now time.Time) {
	sec := now.Unix()
	d := dateHeaders.Load()
	if d == nil || d.sec != sec {
		d = &dateHeader{sec: sec}
		c.Response.Header.CopyTo(&d.h) // fresh: the server's settings, nothing set
		text := "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nDate: " + now.UTC().Format(http.TimeFormat) + "\r\n\r\n"
		if err := d.h.Read(bufio.NewReader(strings.NewReader(text))); err != nil {
			return // cannot be: the text is fixed
		}
		d.h.Del(fasthttp.HeaderContentLength) // given only to read the text
		dateHeaders.Store(d)
	}
	d.h.CopyTo(&c.Response.Header)
}

// panicked answers 500 to c, whose handler panicked with p (noted in
// rec, if logged), as recoverHTTP does for net/http.
func (s *Server) panicked(c *fasthttp.RequestCtx, rec *accessRecord, p any) {
	s.panics.Inc()
	s.log.LogAttrs(s.fastCtx, slog.LevelError, "edge: HTTP handler panicked; answered 500",
		slog.String("method", string(c.Method())), slog.String("path", string(c.Request.Header.RequestURI())),
		slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
	now := time.Now()
	setDate(c, now) // made from this fresh header if none was yet
	c.Response.Reset()
	setDate(c, now)
	if rec != nil {
		rec.bytes = 0
	}
	writeTextOn(fastSink{c: c, began: now, rec: rec}, http.StatusInternalServerError, "internal error\n")
}

// refuseFast answers 400 to a request whose framing RFC 9112 refuses
// and closes the connection: what follows it cannot be told apart from
// a smuggled request.
func (s *Server) refuseFast(c *fasthttp.RequestCtx, msg string) {
	s.fastRefused.Inc()
	setDate(c, time.Now()) // the response is fresh: nothing to reset
	c.SetConnectionClose()
	writeTextOn(fastSink{c: c}, http.StatusBadRequest, "400 Bad Request: "+msg)
}

// badFraming returns why raw, a request's field section as received
// (fasthttp's RawHeaders, ending with the empty line), is refused, or ""
// when it is not, and whether a field's name begins with "If-" (conds:
// the request may be conditional). fasthttp refuses duplicate Content-Lengths, bad chunk
// sizes, transfer codings other than chunked, CR and NUL in values and
// malformed names itself; it accepts what RFC 9112 asks a server to
// refuse or which would let a request hide another behind a proxy that
// reads it otherwise:
//
//   - a bare LF ending a field line (§2.2);
//   - obs-fold, a line continued on the next one (§5.2);
//   - two Content-Lengths (fasthttp refuses them, net/http does not
//     when equal: readLong's requests);
//   - Content-Length with Transfer-Encoding (§6.1), or a
//     Transfer-Encoding that is not "chunked" alone (§6.3);
//   - other control characters in a value (RFC 9110 §5.5).
func badFraming(raw []byte) (msg string, conds bool) {
	var cl, te bool
	for len(raw) > 0 {
		i := bytes.IndexByte(raw, '\n')
		if i < 0 {
			return "", conds // fasthttp gave the whole section; nothing unterminated
		}
		if i == 0 || raw[i-1] != '\r' {
			return "bare LF in the header section\n", conds
		}
		line := raw[:i-1]
		raw = raw[i+1:]
		if len(line) == 0 {
			break // the empty line ending the section
		}
		if line[0] == ' ' || line[0] == '\t' {
			return "obsolete line folding in the header section\n", conds
		}
		name, value, _ := bytes.Cut(line, []byte{':'})
		for _, b := range value {
			if b < 0x20 && b != '\t' || b == 0x7f {
				return "control character in a header field value\n", conds
			}
		}
		switch {
		case len(name) >= 3 && asciiEqualFold(name[:3], "If-"):
			conds = true
		case asciiEqualFold(name, "Content-Length"):
			if cl {
				return "more than one Content-Length\n", conds // fasthttp refuses it too; readLong does not ask it
			}
			cl = true
		case asciiEqualFold(name, "Transfer-Encoding"):
			if te || !asciiEqualFold(bytes.Trim(value, " \t"), "chunked") {
				return "Transfer-Encoding other than chunked\n", conds
			}
			te = true
		}
	}
	if cl && te {
		return "Content-Length with Transfer-Encoding\n", conds
	}
	return "", conds
}

// asciiEqualFold reports whether b is s, ASCII letters in either case.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// handOver gives c's connection to net/http, which reads c's request
// again and serves the connection from then on. fasthttp has read the
// request's header and at most one byte of its body (fastConfig); what
// net/http reads is that, replayed, then what fasthttp's reader holds
// past it, then the connection.
func (s *Server) handOver(c *fasthttp.RequestCtx, pc *prefixConn) {
	req := replay(c)
	c.HijackSetNoResponse(true)
	c.Hijack(func(hj net.Conn) {
		s.fastHandovers.Inc()
		if pc == nil {
			_ = hj.Close()
			return
		}
		pc.tail = readTail{} // net/http's from now on
		// Drain the reader fasthttp hijacked with (it holds what it read
		// past the request) without waiting on the connection: a read
		// deadline in the past.
		_ = pc.Conn.SetReadDeadline(time.Unix(1, 0))
		var b [4096]byte
		for {
			n, err := hj.Read(b[:])
			req = append(req, b[:n]...)
			if err != nil || n == 0 {
				break
			}
		}
		_ = pc.Conn.SetReadDeadline(time.Time{})
		pc.buf = append(req, pc.buf...)
		s.httpQ.give(pc)
	})
}

// replay returns c's request as net/http is to read it: the request line
// and the field section as received (without an Expect: fasthttp
// answered it), then the byte of body fasthttp read, if any.
func replay(c *fasthttp.RequestCtx) []byte {
	h := &c.Request.Header
	raw := h.RawHeaders()
	b := make([]byte, 0, len(h.Method())+len(h.RequestURI())+len(h.Protocol())+len(raw)+8)
	b = append(b, h.Method()...)
	b = append(b, ' ')
	b = append(b, h.RequestURI()...)
	b = append(b, ' ')
	b = append(b, h.Protocol()...)
	b = append(b, "\r\n"...)
	for len(raw) > 0 {
		line, rest, _ := bytes.Cut(raw, []byte("\r\n"))
		raw = rest
		if len(line) == 0 {
			break
		}
		if name, _, _ := bytes.Cut(line, []byte{':'}); asciiEqualFold(name, "Expect") {
			continue
		}
		b = append(append(b, line...), "\r\n"...)
	}
	b = append(b, "\r\n"...)
	if bs := c.RequestBodyStream(); bs != nil && h.ContentLength() > 0 {
		var one [1]byte
		if n, _ := bs.Read(one[:]); n == 1 { // fasthttp's prefetch: no read of the connection
			b = append(b, one[0])
		}
	}
	return b
}
