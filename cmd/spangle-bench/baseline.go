package main

import (
	"context"
	"errors"
	"net"
	"net/http"
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

// serveBaseline serves baselineHandler on bind until ctx ends, then shuts
// down within 5 s.
func serveBaseline(ctx context.Context, bind string) error {
	l, err := net.Listen("tcp", bind)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(baselineHandler), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
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
