package edge

//lint:file-ignore SA1019 x/net/http2's Server is deprecated in favour of net/http's bundled copy of the same code, which has no hook that sees a connection's frames; the reset guard needs one (see below).

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http2"
)

// HTTP/2 rapid reset (CVE-2023-44487): a client opens streams and
// cancels them at once (HEADERS then RST_STREAM), each costing the server
// a handler's start for nothing, and no stream limit stops it, since a
// cancelled stream no longer counts. Go's server bounds the handlers
// running at once but never closes such a connection: 124k
// HEADERS+RST_STREAM frames in 5 s on one connection cost 3.7 s of CPU.
// So, as Netty and others do, a connection's RST_STREAM frames are
// counted over a window (Config.H2MaxResets per H2ResetWindow), and one
// that sends more gets GOAWAY (ENHANCE_YOUR_CALM) and is closed.
//
// net/http's own HTTP/2 server has no hook that sees frames, and a TLS
// connection's frames can only be read above the TLS layer: HTTP/2 is
// served by golang.org/x/net/http2 (the code net/http bundles), through
// http.Server.TLSNextProto, on the TLS connection wrapped in a
// resetGuard that follows the frame headers going by.

// serveH2 makes s.http serve HTTP/2 (on TLS connections that chose "h2")
// with x/net/http2, each connection's resets bounded by cfg.
func (s *Server) serveH2(cfg Config, flood prometheus.Counter) error {
	h2 := &http2.Server{}
	if err := http2.ConfigureServer(s.http, h2); err != nil { // graceful Shutdown, idle timeout
		return err
	}
	s.http.TLSNextProto[http2.NextProtoTLS] = func(hs *http.Server, c *tls.Conn, h http.Handler) {
		// net/http hands the connection's base context down this way
		// (x/net/http2's ConfigureServer reads it alike).
		var ctx context.Context
		if bc, ok := h.(interface{ BaseContext() context.Context }); ok {
			ctx = bc.BaseContext()
		}
		g := &resetGuard{Conn: c, max: cfg.H2MaxResets, window: cfg.H2ResetWindow,
			preface: len(http2.ClientPreface), closed: make(chan struct{})}
		g.onTrip = func() {
			flood.Inc()
			s.log.LogAttrs(ctx, slog.LevelWarn, "edge: HTTP/2 connection closed: too many stream resets",
				slog.String("remote", c.RemoteAddr().String()), slog.Int("resets", g.count),
				slog.Duration("within", time.Since(g.start)))
		}
		h2.ServeConn(g, &http2.ServeConnOpts{Context: ctx, Handler: h, BaseConfig: hs})
	}
	return nil
}

// resetGuard is a server's HTTP/2 connection (after TLS) that follows the
// client's frames as they are read: past max RST_STREAM frames within
// window, its next Read fails with a connection error, ENHANCE_YOUR_CALM,
// on which the server sends GOAWAY and closes the connection; later
// Reads wait for that close. Read is called by one goroutine at a time
// (the server's frame reader); Close by any.
type resetGuard struct {
	*tls.Conn // ConnectionState: the server reads the TLS state from it
	max       int
	window    time.Duration
	onTrip    func()

	preface int     // bytes of the client preface still to pass
	skip    int     // payload bytes of the current frame still to pass
	hdr     [9]byte // the frame header being read
	nhdr    int
	start   time.Time // of the current window
	count   int       // resets in it
	tripped bool
	failed  bool // the connection error was returned

	closed    chan struct{}
	closeOnce sync.Once
}

func (g *resetGuard) Read(p []byte) (int, error) {
	if g.tripped {
		if !g.failed {
			g.failed = true
			return 0, http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
		}
		<-g.closed // read nothing more of this client: the GOAWAY, then the close
		return 0, net.ErrClosed
	}
	n, err := g.Conn.Read(p)
	if g.scan(p[:n]) {
		g.tripped = true
		g.onTrip()
	}
	return n, err
}

func (g *resetGuard) Close() error {
	g.closeOnce.Do(func() { close(g.closed) })
	return g.Conn.Close()
}

// scan follows the frames in b and reports whether a RST_STREAM in it
// passed the limit.
func (g *resetGuard) scan(b []byte) bool {
	over := false
	for len(b) > 0 {
		switch {
		case g.preface > 0:
			n := min(g.preface, len(b))
			g.preface, b = g.preface-n, b[n:]
		case g.skip > 0:
			n := min(g.skip, len(b))
			g.skip, b = g.skip-n, b[n:]
		default:
			n := copy(g.hdr[g.nhdr:], b)
			g.nhdr, b = g.nhdr+n, b[n:]
			if g.nhdr < len(g.hdr) {
				continue
			}
			g.nhdr = 0
			g.skip = int(g.hdr[0])<<16 | int(g.hdr[1])<<8 | int(g.hdr[2])
			if http2.FrameType(g.hdr[3]) == http2.FrameRSTStream && g.reset() {
				over = true
			}
		}
	}
	return over
}

// reset counts one RST_STREAM and reports whether the window holds more
// than max.
func (g *resetGuard) reset() bool {
	now := time.Now()
	if now.Sub(g.start) > g.window {
		g.start, g.count = now, 0
	}
	g.count++
	return g.count > g.max
}
