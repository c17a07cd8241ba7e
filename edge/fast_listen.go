package edge

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"golang.org/x/net/http2"
)

// One listener, two servers. Serve accepts every connection and a
// goroutine of its own decides which server takes it:
//
//   - over TLS, by what ALPN chose: "h2" goes to net/http (HTTP/2 with
//     the rapid-reset guard, h2_resets.go); anything else is HTTP/1.1;
//   - an HTTP/1.1 connection whose first bytes are the HTTP/2 client
//     preface ("PRI * HTTP/2.0", prior knowledge) goes to net/http, which
//     answers it as it always did; any other goes to the fast path
//     (fasthttp, fast.go).
//
// net/http reads its connections from a connQueue, a listener fed by
// the dispatch and by the fast path, which hands it a connection with a
// request it does not serve (fast.go, handOver). The fast path serves
// each of its connections on the goroutine that dispatched it
// (fasthttp's ServeConn: no worker pool, whose cleaner would outlive
// Shutdown); nor fasthttp's Date (setDate, fast.go). The TLS handshake and the first read are made on that
// goroutine too, under the handshake and header timeouts, never on the
// accepting one, so that a slow client holds only itself.

// fastConfig returns the fast path's fasthttp.Server for cfg, serving s.
func (s *Server) fastConfig(cfg Config) *fasthttp.Server {
	return &fasthttp.Server{
		Handler:      s.serveFast,
		ErrorHandler: s.fastError,
		// A request with a body is handed to net/http (fast.go): fasthttp
		// reads at most one byte of it, waiting ReadTimeout for it, and
		// net/http the rest (chunked bodies: nothing).
		StreamRequestBody: true,
		HeaderReceived: func(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
			if h.ContentLength() == 0 || h.ContentLength() == -2 {
				return fasthttp.RequestConfig{} // no body: the header timeout stands
			}
			return fasthttp.RequestConfig{ReadTimeout: cfg.ReadTimeout, MaxRequestBodySize: 1}
		},
		ConnState: s.fastConnState,
		// net/http's bounds: the header timeout until a request's header
		// is read (its body gets ReadTimeout), a batch's body at most. A
		// header section longer than the read buffer goes to net/http,
		// which reads it up to MaxHeaderBytes (fastError).
		ReadTimeout:    cfg.ReadHeaderTimeout,
		WriteTimeout:   cfg.WriteTimeout,
		IdleTimeout:    cfg.IdleTimeout,
		ReadBufferSize: fastReadBuffer,
		// net/http sends neither, and adds no Content-Type to a response
		// without one.
		NoDefaultServerHeader: true,
		NoDefaultContentType:  true,
		NoDefaultDate:         true, // setDate (fast.go) writes it
		// The ways fasthttp departs from net/http that a client could
		// see are turned off: request bodies are kept as sent (no form
		// parsing), and a hijacked connection is net/http's to close.
		DisablePreParseMultipartForm: true,
		KeepHijackedConns:            true,
		// Malformed requests are answered (fastError), not logged: a
		// client could fill the log with them.
		Logger: fastLogger{},
	}
}

// fastLogger drops fasthttp's log lines: what they report is answered
// and counted (fastError, spangle_http_refused_total).
type fastLogger struct{}

func (fastLogger) Printf(string, ...any) {}

// fastError answers a request fasthttp could not read, as net/http
// answers one: 413 for a body over MaxBatchBytes, 408 past the header
// timeout, 400 otherwise. fasthttp closes the connection after it.
//
// A header section longer than the read buffer (ErrSmallBuffer) is
// net/http's to read instead, up to MaxHeaderBytes (431 past it): the
// connection is detached from fasthttp, which has read the buffer's
// worth of the request (its last bytes read, kept by the prefixConn's
// tail) and released the buffer, and dispatch hands it over once
// ServeConn returns, its framing checked (readLong). fasthttp flushed
// any answer held back for an earlier pipelined request before it read
// this one.
func (s *Server) fastError(c *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	if errors.As(err, &small) {
		if pc := asPrefixConn(c.Conn()); pc != nil && pc.tail.full() {
			pc.detached.Store(true) // fasthttp's answer is dropped, its Close kept
			return
		}
	}
	s.fastRefused.Inc()
	status, text := 400, "400 Bad Request"
	switch {
	case errors.As(err, &small): // no tail: cannot be
		status, text = 431, "431 Request Header Fields Too Large"
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		status, text = 413, "413 Request Entity Too Large"
	case isTimeout(err):
		status, text = 408, "408 Request Timeout"
	}
	setDate(c, time.Now()) // the response is fresh: nothing to reset
	c.SetConnectionClose()
	writeTextOn(fastSink{c: c}, status, text)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// fastConnState follows the fast path's connections' states, so that
// Shutdown closes the idle ones (and the rest when it gives up).
func (s *Server) fastConnState(c net.Conn, st fasthttp.ConnState) {
	if pc := asPrefixConn(c); pc != nil {
		pc.state.Store(int32(st))
	}
}

// asPrefixConn returns the prefixConn c is, nil if none.
func asPrefixConn(c net.Conn) *prefixConn {
	switch pc := c.(type) {
	case *prefixConn:
		return pc
	case *prefixTLSConn:
		return pc.prefixConn
	}
	return nil
}

// doors holds the two servers' queues and the dispatch's state.
type doors struct {
	httpQ      *connQueue // net/http's connections
	fast       *fasthttp.Server
	fastCtx    context.Context // the fast path's lookups' context
	fastCancel context.CancelFunc
	startDoors sync.Once
	doorsDone  sync.WaitGroup // net/http's Serve
	fastDone   sync.WaitGroup // the fast path's connections

	connsMu   sync.Mutex
	closing   bool                  // Shutdown began: no more dispatch
	listeners map[net.Listener]bool // Serve's, closed by Shutdown
	sniffing  map[net.Conn]bool     // in the handshake or first read
	fastConns map[*prefixConn]bool  // the fast path's
	closed    atomic.Bool           // closing, read without the lock

	fastHandovers prometheus.Counter // spangle_http_handovers_total
	fastRefused   prometheus.Counter // spangle_http_refused_total
	connsBy       *prometheus.CounterVec
}

// newDoors registers the dispatch's metrics and makes the queues.
func (s *Server) newDoors(cfg Config, reg prometheus.Registerer) error {
	s.httpQ = newConnQueue()
	s.fastCtx, s.fastCancel = context.WithCancel(context.Background())
	s.listeners, s.sniffing, s.fastConns = map[net.Listener]bool{}, map[net.Conn]bool{}, map[*prefixConn]bool{}
	s.fast = s.fastConfig(cfg)
	var err error
	if s.connsBy, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "spangle_http_connections_total",
		Help: "HTTP connections accepted, by the server that took them: fast (HTTP/1.1, fasthttp) or net/http (HTTP/2, and the HTTP/2 preface in clear text).",
	}, []string{"server"})); err != nil {
		return err
	}
	s.connsBy.WithLabelValues("fast")
	s.connsBy.WithLabelValues("net/http")
	if s.fastHandovers, err = register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "spangle_http_handovers_total",
		Help: "HTTP/1.1 connections the fast path handed to net/http with a request it does not answer (anything but a key GET or HEAD, or one whose header section is longer than the fast path's 4 KiB read buffer); net/http serves them from then on.",
	})); err != nil {
		return err
	}
	s.fastRefused, err = register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "spangle_http_refused_total",
		Help: "HTTP/1.1 requests the fast path refused before serving them (400: framing RFC 9112 refuses, such as Content-Length with Transfer-Encoding, obs-fold or a bare LF; 431, 413, 408), each closing its connection.",
	}))
	return err
}

// serveDoors accepts l's connections and dispatches them until l is
// closed.
func (s *Server) serveDoors(l net.Listener) error {
	s.connsMu.Lock()
	if s.closing {
		s.connsMu.Unlock()
		_ = l.Close()
		return nil
	}
	s.listeners[l] = true
	s.connsMu.Unlock()
	s.startDoors.Do(func() {
		s.doorsDone.Go(func() {
			_ = s.http.Serve(s.httpQ) // returns once Shutdown closes httpQ
		})
	})
	var delay time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			s.connsMu.Lock()
			closing := s.closing
			s.connsMu.Unlock()
			if closing {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// As net/http: a full file table and the like pass.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.http.ErrorLog.Printf("http: Accept error: %v; retrying in %v", err, delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		go s.dispatch(c)
	}
}

// dispatch gives c to the server that is to serve it, and serves it
// itself when that is the fast path.
func (s *Server) dispatch(c net.Conn) {
	if !s.track(c, nil, true) {
		_ = c.Close()
		return
	}
	conn, h2 := s.sniff(c)
	var fast *prefixConn
	if !h2 {
		fast = asPrefixConn(conn)
	}
	if !s.track(c, fast, false) || conn == nil {
		_ = c.Close()
		return
	}
	if h2 {
		s.connsBy.WithLabelValues("net/http").Inc()
		s.httpQ.give(conn)
		return
	}
	s.connsBy.WithLabelValues("fast").Inc()
	_ = s.fast.ServeConn(conn) // closes conn, unless handed over
	// A header section longer than the read buffer (fastError): read
	// and checked while Shutdown can still close the connection, then
	// net/http's.
	long := fast != nil && fast.detached.Swap(false) && s.readLong(fast)
	s.connsMu.Lock()
	delete(s.fastConns, fast)
	s.connsMu.Unlock()
	s.fastDone.Done()
	if long {
		s.fastHandovers.Inc()
		s.httpQ.give(fast)
	}
}

// track adds c to the connections being dispatched (add), or moves it
// from them to the fast path's (as fast, unless nil), and reports
// whether the dispatch goes on (Shutdown has not begun).
func (s *Server) track(c net.Conn, fast *prefixConn, add bool) bool {
	s.connsMu.Lock()
	defer s.connsMu.Unlock()
	if add {
		s.sniffing[c] = true
		return !s.closing
	}
	delete(s.sniffing, c)
	if s.closing {
		return false
	}
	if fast != nil {
		s.fastConns[fast] = true
		s.fastDone.Add(1)
	}
	return true
}

// sniff makes c's TLS handshake, when the door speaks TLS, and reads its
// first bytes, and returns the connection to serve (nil: closed) and
// whether net/http is to serve it.
func (s *Server) sniff(c net.Conn) (net.Conn, bool) {
	conn := c
	if s.tls {
		tc := tls.Server(c, s.http.TLSConfig)
		ctx, cancel := context.WithTimeout(s.fastCtx, s.handshakeTimeout())
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			s.handshakeFailed(c, err)
			return nil, false
		}
		if tc.ConnectionState().NegotiatedProtocol == http2.NextProtoTLS {
			return tc, true
		}
		conn = tc
	}
	// The first read: the request (or the HTTP/2 preface) is read into
	// the prefix here, and served from it.
	_ = conn.SetReadDeadline(time.Now().Add(s.http.ReadHeaderTimeout))
	p := &prefixConn{Conn: conn, buf: make([]byte, 0, 1024), tail: readTail{buf: make([]byte, s.fast.ReadBufferSize)}}
	p.gone.pc, p.gone.base = p, s.fastCtx
	var served net.Conn = p
	if s.tls {
		served = &prefixTLSConn{p}
	}
	for {
		n, err := conn.Read(p.buf[len(p.buf):cap(p.buf)])
		p.buf = p.buf[:len(p.buf)+n]
		if !prefaceMaybe(p.buf) || len(p.buf) >= len(prefacePRI) {
			break
		}
		if err != nil {
			if len(p.buf) == 0 {
				return nil, false // gone, or silent past the header timeout
			}
			break
		}
	}
	_ = conn.SetReadDeadline(time.Time{})
	if len(p.buf) >= len(prefacePRI) && string(p.buf[:len(prefacePRI)]) == prefacePRI {
		return p, true
	}
	return served, false
}

// prefacePRI begins the HTTP/2 client preface ("PRI * HTTP/2.0…"): an
// HTTP/1 request of method PRI, which net/http answers.
const prefacePRI = "PRI "

// prefaceMaybe reports whether b could begin prefacePRI.
func prefaceMaybe(b []byte) bool {
	n := min(len(b), len(prefacePRI))
	return string(b[:n]) == prefacePRI[:n]
}

// handshakeTimeout is net/http's: the least of its read and write
// timeouts.
func (s *Server) handshakeTimeout() time.Duration {
	return min(s.http.ReadHeaderTimeout, s.http.ReadTimeout, s.http.WriteTimeout)
}

// handshakeFailed does what net/http does with a failed handshake: a
// client that spoke plain HTTP gets a plain 400 saying so; the error is
// logged as net/http logs it.
func (s *Server) handshakeFailed(c net.Conn, err error) {
	var re tls.RecordHeaderError
	if errors.As(err, &re) && re.Conn != nil && looksLikeHTTP(re.RecordHeader[:]) {
		_, _ = io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
		_ = re.Conn.Close()
		return
	}
	if !errors.Is(err, io.EOF) {
		s.http.ErrorLog.Printf("http: TLS handshake error from %s: %v", c.RemoteAddr(), err)
	}
}

// looksLikeHTTP reports whether a TLS record header is the beginning of
// an HTTP request (net/http's test).
func looksLikeHTTP(hdr []byte) bool {
	switch string(hdr[:5]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO":
		return true
	}
	return false
}

// shutdownDoors closes the listeners and the connections being
// dispatched, drains both servers within ctx, and if ctx ends first
// closes every connection left. It returns ctx's error then.
func (s *Server) shutdownDoors(ctx context.Context) error {
	s.connsMu.Lock()
	s.closing = true
	s.closed.Store(true)
	for l := range s.listeners {
		_ = l.Close()
	}
	for c := range s.sniffing {
		_ = c.Close()
	}
	s.connsMu.Unlock()
	errc := make(chan error, 1)
	go func() { errc <- s.http.Shutdown(ctx) }()
	err := s.drainFast(ctx)
	if herr := <-errc; herr != nil {
		err = herr
	}
	if err != nil {
		// What is left is closed, then its handlers see their contexts
		// end: an answer they write after that reaches no client.
		_ = s.http.Close()
		s.connsMu.Lock()
		for pc := range s.fastConns {
			_ = pc.Close()
		}
		s.connsMu.Unlock()
		s.fastCancel()
	}
	s.httpQ.Close()
	s.fastDone.Wait()
	s.doorsDone.Wait()
	return err
}

// drainFast closes the fast path's idle connections until none is left
// (a busy one closes after its answer: serveFast says Connection: close
// once closing is set), or returns ctx's error.
func (s *Server) drainFast(ctx context.Context) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		s.connsMu.Lock()
		for pc := range s.fastConns {
			if fasthttp.ConnState(pc.state.Load()) == fasthttp.StateIdle {
				_ = pc.Close()
			}
		}
		left := len(s.fastConns)
		s.connsMu.Unlock()
		if left == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// closingDoors reports whether Shutdown has begun.
func (s *Server) closingDoors() bool { return s.closed.Load() }

// connQueue is a listener whose connections are given to it.
type connQueue struct {
	ch        chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

func newConnQueue() *connQueue {
	return &connQueue{ch: make(chan net.Conn), done: make(chan struct{})}
}

// give hands c to the server accepting from q; after Close, it closes c.
func (q *connQueue) give(c net.Conn) {
	select {
	case q.ch <- c:
	case <-q.done:
		_ = c.Close()
	}
}

func (q *connQueue) Accept() (net.Conn, error) {
	select {
	case c := <-q.ch:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

func (q *connQueue) Close() error {
	q.closeOnce.Do(func() { close(q.done) })
	return nil
}

func (q *connQueue) Addr() net.Addr { return queueAddr{} }

type queueAddr struct{}

func (queueAddr) Network() string { return "queue" }
func (queueAddr) String() string  { return "queue" }

// prefixConn is a connection whose first bytes were read already: Read
// returns them first. Both servers serve it (the fast path as a
// prefixTLSConn over TLS); net/http sees the bytes above TLS and sets no
// Request.TLS (handedTLS says it instead). While the fast path serves
// it, its tail keeps the last bytes Read returned (fastError).
type prefixConn struct {
	net.Conn
	buf      []byte
	tail     readTail     // the fast path's; empty once handed over
	gone     goneWatch    // the fast path's request context (fast_gone.go)
	state    atomic.Int32 // the fast path's fasthttp.ConnState
	detached atomic.Bool  // net/http is to read it (fastError): Write drops, Close keeps
}

func (c *prefixConn) Read(p []byte) (n int, err error) {
	if len(c.buf) > 0 {
		n = copy(p, c.buf)
		c.buf = c.buf[n:]
		if len(c.buf) == 0 {
			c.buf = nil // the prefix's array is not kept
		}
	} else {
		n, err = c.Conn.Read(p)
	}
	if c.tail.buf != nil {
		c.tail.add(p[:n])
	}
	return n, err
}

// Write drops fasthttp's answer to a request net/http is to read
// (detached).
func (c *prefixConn) Write(p []byte) (int, error) {
	if c.detached.Load() {
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// Close keeps a detached connection open for net/http.
func (c *prefixConn) Close() error {
	if c.detached.Load() {
		return nil
	}
	return c.Conn.Close()
}

// CloseWrite half-closes the connection, when it can (limitConnCW,
// tls.Conn): net/http does after an error answer, so that the client
// reads it before the close.
func (c *prefixConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// prefixTLSConn is a prefixConn over TLS: fasthttp tells TLS
// connections by these methods (RequestCtx.IsTLS, TLSConnectionState).
type prefixTLSConn struct{ *prefixConn }

func (c *prefixTLSConn) Handshake() error { return nil } // made by sniff

func (c *prefixTLSConn) ConnectionState() tls.ConnectionState {
	return c.Conn.(*tls.Conn).ConnectionState()
}

// handedTLSKey marks, in the context of a connection the fast path
// handed to net/http, that it speaks TLS: net/http sees the bytes
// decrypted and sets no Request.TLS.
type handedTLSKey struct{}

// handedConnContext is net/http's ConnContext: it marks handed-over
// TLS connections.
func handedConnContext(ctx context.Context, c net.Conn) context.Context {
	if p, ok := c.(*prefixConn); ok && isTLS(p.Conn) {
		return context.WithValue(ctx, handedTLSKey{}, true)
	}
	return ctx
}

func isTLS(c net.Conn) bool {
	_, ok := c.(*tls.Conn)
	return ok
}

// handedTLS reports whether ctx is a request's on a handed-over TLS
// connection.
func handedTLS(ctx context.Context) bool {
	v, _ := ctx.Value(handedTLSKey{}).(bool)
	return v
}
