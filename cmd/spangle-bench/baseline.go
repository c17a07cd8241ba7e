package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// baselineBody is what the baseline answers to every request: 100 bytes,
// the size of a generated value.
var baselineBody = []byte(strings.Repeat("0123456789", 10))

// baselineHandler answers every request with baselineBody: the least a Go
// net/http server can do per request, to compare spangle with.
func baselineHandler(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(baselineBody)
}

// headersValue is what headersHandler answers with: the headers spangle
// sends with a value of the bench's db, precomputed, and the same 100
// bytes.
var headersValue = http.Header{
	"X-Spangle-Version": {"1"}, "X-Spangle-Db": {"bench"}, "Etag": {`"0123456789abcdef"`},
	"Cache-Control": {"public, max-age=60"}, "Last-Modified": {"Thu, 26 Nov 2026 10:00:00 GMT"},
	"Content-Type": {"application/octet-stream"}, "X-Content-Type-Options": {"nosniff"},
	"Content-Length": {strconv.Itoa(len(baselineBody))},
}

// headersHandler answers every request as spangle answers a GET of a
// value, without finding one: what net/http costs with the headers a
// cache needs, spangle's floor on it.
func headersHandler(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	for k, v := range headersValue {
		h[k] = v
	}
	_, _ = w.Write(baselineBody)
}

// serveBaseline serves baselineHandler (headersHandler with headers) on
// bind until ctx ends, then shuts down within 5 s. With certFile and
// keyFile it serves HTTPS as net/http does by default (TLS 1.2 or 1.3,
// HTTP/2 by ALPN): the bare TLS handler spangle's HTTPS is compared with.
func serveBaseline(ctx context.Context, bind string, headers bool, certFile, keyFile string) error {
	l, err := net.Listen("tcp", bind)
	if err != nil {
		return err
	}
	h := http.HandlerFunc(baselineHandler)
	if headers {
		h = headersHandler
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() {
		if certFile != "" {
			errc <- srv.ServeTLS(l, certFile, keyFile)
			return
		}
		errc <- srv.Serve(l)
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}
