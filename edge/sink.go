package edge

import (
	"context"
	"net/http"
	"strconv"
	"time"
)

// A key lookup is answered by one core (serveKeyOn, writeAnswerOn,
// writeFailureOn) for both HTTP servers on the port: net/http's
// (HTTP/2, and HTTP/1.1 requests the fast path hands over) through
// httpSink, and the HTTP/1.1 fast path's (fast.go) through fastSink. A
// sink is the request as the core reads it and the response as it
// writes it. Both are small value types, so that the core's generic
// functions are compiled once per sink without an allocation per call.
type sink interface {
	// ctx is the request's context: what the lookup runs under.
	ctx() context.Context
	// head reports whether the request is a HEAD.
	head() bool
	// rawQuery and rawPath are the request target's, as net/url gives
	// them (url.URL's RawQuery and RawPath).
	rawQuery() string
	rawPath() string
	// fields returns the request's field lines named name (a canonical
	// name), nil for none. The caller does not modify them.
	fields(name string) []string
	// set sets a response header field (a canonical name) to v; the sink
	// may keep v and must not modify it.
	set(name string, v []string)
	// writeHeader sends the status and the header; write sends body bytes
	// after it, writeShared bytes that are never modified (a node's
	// value), which the sink may keep instead of copying.
	writeHeader(status int)
	write(p []byte)
	writeShared(p []byte)
	// record is the request's access log record, nil when not logged.
	record() *accessRecord
	// start is when the request started (its metrics' duration): the
	// access log record's start when logged (a clock read costs
	// 100-200 ns on some virtual machines; a logged lookup reads it
	// once for both), else now or when the sink was made.
	start() time.Time
}

// httpSink is net/http's request and response.
type httpSink struct {
	w http.ResponseWriter
	r *http.Request
}

func (k httpSink) ctx() context.Context        { return k.r.Context() }
func (k httpSink) head() bool                  { return k.r.Method == http.MethodHead }
func (k httpSink) rawQuery() string            { return k.r.URL.RawQuery }
func (k httpSink) rawPath() string             { return k.r.URL.RawPath }
func (k httpSink) fields(name string) []string { return k.r.Header[name] }
func (k httpSink) set(name string, v []string) { k.w.Header()[name] = v }
func (k httpSink) writeHeader(status int)      { k.w.WriteHeader(status) }
func (k httpSink) write(p []byte)              { k.w.Write(p) } //nolint:errcheck // the client went away; nothing to do
func (k httpSink) writeShared(p []byte)        { k.write(p) }
func (k httpSink) record() *accessRecord       { return accessNote(k.w) }

func (k httpSink) start() time.Time {
	if rec := accessNote(k.w); rec != nil {
		return rec.start
	}
	return time.Now()
}

// writeBodyOn writes a complete response with a known body: status, the
// content type, nosniff and Content-Length, and the body unless HEAD.
func writeBodyOn[K sink](k K, status int, contentType []string, body []byte) {
	k.set(hdrContentType, contentType)
	k.set(hdrNoSniff, valNoSniff)
	k.set(hdrContentLength, []string{strconv.Itoa(len(body))})
	k.writeHeader(status)
	if !k.head() && len(body) > 0 {
		k.write(body)
	}
}

// writeTextOn writes a plain-text response.
func writeTextOn[K sink](k K, status int, text string) {
	writeBodyOn(k, status, valText, []byte(text))
}
