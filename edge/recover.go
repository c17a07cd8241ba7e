package edge

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/edge/internal/natswire"
)

// Every request goroutine recovers: a panic anywhere below a handler (a
// bug, a damaged file that slipped past blocks' checks) becomes a 500 for
// that request, logged with its stack and counted in spangle_panics_total,
// instead of an empty reply (net/http) or the end of the process (a
// nats.go subscription goroutine).

// newPanicCounter registers spangle_panics_total{door} (shared by the
// HTTP and NATS doors of one registry).
func newPanicCounter(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	return register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "spangle_panics_total",
		Help: "Requests whose handler panicked and were answered 500 instead, by door (http, nats).",
	}, []string{"door"}))
}

// recoverHTTP is deferred by ServeHTTP. http.ErrAbortHandler, net/http's
// own way to abort a response, passes through.
func (s *Server) recoverHTTP(w http.ResponseWriter, r *http.Request) {
	p := recover()
	if p == nil {
		return
	}
	if p == http.ErrAbortHandler {
		panic(p)
	}
	s.panics.Inc()
	s.log.LogAttrs(r.Context(), slog.LevelError, "edge: HTTP handler panicked; answered 500",
		slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
	// If the handler wrote its header already, this adds nothing the
	// client sees but the end of the response.
	writeText(w, r, http.StatusInternalServerError, "internal error\n")
}

// recoverNATS is deferred by the NATS handlers: it answers m with a 500.
func (s *NATSServer) recoverNATS(ctx context.Context, m *nats.Msg, op *natsOp) {
	p := recover()
	if p == nil {
		return
	}
	s.met.panics.Inc()
	s.log.LogAttrs(ctx, slog.LevelError, "edge: NATS handler panicked; answered 500",
		slog.String("subject", m.Subject), slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
	h := nats.Header{
		natswire.HeaderStatus: []string{statusText(http.StatusInternalServerError)},
		natswire.HeaderError:  []string{fmt.Sprintf("internal error: %v", p)},
	}
	op.observe(s.send(m, h, nil, "", http.StatusInternalServerError), 0)
}
