package edge_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/nodetest"
)

// The HTTP/1.1 fast path (fast.go) on the wire: requests written by
// hand, answers read with net/http's parser.

// wireAnswer is one answer read off the wire.
type wireAnswer struct {
	status int
	header http.Header
	body   string
}

// exchange writes raw on a new connection to addr (TLS when tc is set),
// half-closes it and reads every answer until the server closes it.
func exchange(t testing.TB, addr string, tc *tls.Config, raw string) []wireAnswer {
	t.Helper()
	c := dialWire(t, addr, tc)
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatalf("write: %v", err)
	}
	switch cw := c.(type) {
	case *net.TCPConn:
		_ = cw.CloseWrite()
	case *tls.Conn:
		_ = cw.CloseWrite()
	}
	return readAnswers(t, c, methodsOf(raw))
}

func dialWire(t testing.TB, addr string, tc *tls.Config) net.Conn {
	t.Helper()
	var c net.Conn
	var err error
	if tc != nil {
		c, err = tls.Dial("tcp", addr, tc)
	} else {
		c, err = net.Dial("tcp", addr)
	}
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	// A bound for a server that never answers; answered exchanges end
	// with the server's close long before.
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return c
}

// methodsOf returns the methods of the requests in raw that begin a line
// (so that HEAD answers are read without a body).
func methodsOf(raw string) []string {
	var m []string
	for line := range strings.SplitSeq(raw, "\n") {
		for _, meth := range []string{"GET ", "HEAD ", "POST ", "BREW "} {
			if strings.HasPrefix(line, meth) {
				m = append(m, strings.TrimSpace(meth))
			}
		}
	}
	return m
}

// readAnswers reads answers from c until it is closed; methods[i] is the
// i-th request's.
func readAnswers(t testing.TB, c net.Conn, methods []string) []wireAnswer {
	t.Helper()
	br := bufio.NewReader(c)
	var out []wireAnswer
	for i := 0; ; i++ {
		req := &http.Request{Method: "GET"}
		if i < len(methods) {
			req.Method = methods[i]
		}
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
				strings.Contains(err.Error(), "connection reset") {
				return out
			}
			t.Fatalf("answer %d: %v", i, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("answer %d body: %v", i, err)
		}
		if d := resp.Header.Values("Date"); d != nil {
			// Compared as present or not: one HTTP-date.
			if _, err := http.ParseTime(d[0]); err != nil || len(d) != 1 {
				t.Errorf("answer %d: Date %q, want one HTTP-date", i, d)
			}
			resp.Header["Date"] = []string{"(a date)"}
		}
		out = append(out, wireAnswer{status: resp.StatusCode, header: resp.Header, body: string(body)})
	}
}

// wireBackend is newFake with keys that need escaping in a URL.
func wireBackend() *fakeBackend {
	b := newFake()
	b.dbs["k"] = fakeDB{result: node.Result{Version: "v1", Modified: testModified, CacheControl: "max-age=60"},
		values: map[string]string{"a/b": "slash", "a\x00b": "nul", "\xff\xfe": "not UTF-8", "u": "plain",
			"big": strings.Repeat("big ", 2000)}}
	return b
}

// TestFastPathAnswersAsNetHTTP: each request, written by hand, is
// answered alike by the fast path (on a new connection) and by net/http
// (on a connection handed to it by a first request for /livez), over
// clear text and TLS: status, every header but Date, body.
func TestFastPathAnswersAsNetHTTP(t *testing.T) {
	reqs := []string{
		"GET /names/alice", "HEAD /names/alice", "GET /names/nobody", "GET /nodb/x",
		"GET /k/a%2Fb", "GET /k/a/b", "GET /k/a%2fb", "GET /k/%75", "GET /k/u?raw=1", "GET /k/u?other=1",
		"GET /k/a%00b", "GET /k/%FF%FE", "GET /k/%ff%fe", "GET /k/%zz", "GET /k/u?proxy=v1",
		"GET /k/big", "HEAD /k/big", "GET /k/big\r\nAccept-Encoding: gzip", "HEAD /k/big\r\nAccept-Encoding: gzip",
		"GET /names/alice\r\nIf-None-Match: \"x\", *", "GET /names/alice\r\nIf-Match: \"nope\"",
		"GET /names/alice\r\nIf-Modified-Since: Sun, 01 Mar 2026 13:00:00 GMT",
		"GET /names/alice\r\nIf-Unmodified-Since: Thu, 01 Jan 1970 00:00:00 GMT",
		"GET /names/alice\r\nif-none-match: *", "GET /names/alice\r\nIF-MATCH: \"nope\"",
		"BREW /names/alice", "POST /names/alice", "GET /names/", "GET //x",
	}
	b := wireBackend()
	run := func(t *testing.T, addr string, tc *tls.Config) {
		for _, r := range reqs {
			t.Run(strings.ReplaceAll(r, "\r\n", " "), func(t *testing.T) {
				req := r + " HTTP/1.1\r\nHost: x\r\n\r\n"
				if i := strings.Index(r, "\r\n"); i >= 0 {
					req = r[:i] + " HTTP/1.1\r\nHost: x" + r[i:] + "\r\n\r\n"
				}
				fast := exchange(t, addr, tc, req)
				slow := exchange(t, addr, tc, "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n"+req)
				if len(fast) != 1 || len(slow) != 2 {
					t.Fatalf("%d answers on the fast path, %d on net/http's (want 1 and 2)", len(fast), len(slow)-1)
				}
				f, s := fast[0], slow[1]
				if f.status != s.status || f.body != s.body {
					t.Errorf("fast path %d %q, net/http %d %q", f.status, f.body, s.status, s.body)
				}
				for name := range mergeKeys(f.header, s.header) {
					if fv, sv := f.header.Values(name), s.header.Values(name); !slices.Equal(fv, sv) {
						t.Errorf("%s: fast path %q, net/http %q", name, fv, sv)
					}
				}
			})
		}
	}
	opts := []func(*edge.Config){func(c *edge.Config) { c.GzipMinBytes = 1024; c.PeerToken = "secret" }}
	t.Run("clear", func(t *testing.T) { run(t, startServer(t, b, opts...).addr, nil) })
	t.Run("TLS", func(t *testing.T) {
		ts, ca := startTLSTestServer(t, b, opts...)
		run(t, ts.addr, &tls.Config{RootCAs: ca, NextProtos: []string{"http/1.1"}})
	})
}

// mergeKeys returns the header names of a and b.
func mergeKeys(a, b http.Header) map[string]bool {
	m := map[string]bool{}
	for k := range a {
		m[k] = true
	}
	for k := range b {
		m[k] = true
	}
	return m
}

// TestFastPathPipelining: requests sent together on one connection are
// answered in order, a request net/http serves among them (the
// connection handed over in the middle) and the key requests after it
// included; keep-alive holds a connection over many requests.
func TestFastPathPipelining(t *testing.T) {
	ts := startServer(t, wireBackend())
	raw := "GET /names/alice HTTP/1.1\r\nHost: x\r\n\r\n" +
		"HEAD /k/u HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /k/a%2Fb HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /k/u HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /names/nobody HTTP/1.1\r\nHost: x\r\n\r\n"
	got := exchange(t, ts.addr, nil, raw)
	want := []struct {
		status int
		body   string
	}{{200, "Alice Liddell"}, {200, ""}, {200, "slash"}, {200, "ok\n"}, {200, "plain"}, {404, ""}}
	if len(got) != len(want) {
		t.Fatalf("%d answers, want %d", len(got), len(want))
	}
	for i, w := range want {
		if got[i].status != w.status || got[i].body != w.body {
			t.Errorf("answer %d: %d %q, want %d %q", i, got[i].status, got[i].body, w.status, w.body)
		}
	}
	if n := counterOf(t, ts.registry, "spangle_http_handovers_total"); n != 1 {
		t.Errorf("%v connections handed over, want 1", n)
	}

	// Keep-alive: 200 lookups on one connection, one connection counted.
	c := dialWire(t, ts.addr, nil)
	defer c.Close()
	br := bufio.NewReader(c)
	for i := range 200 {
		if _, err := io.WriteString(c, "GET /k/u HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(body) != "plain" || resp.Close {
			t.Fatalf("request %d: %d %q close=%v", i, resp.StatusCode, body, resp.Close)
		}
	}
	if n := counterOf(t, ts.registry, "spangle_http_connections_total", "server", "fast"); n != 2 {
		t.Errorf("%v fast connections, want 2", n)
	}
}

// TestFastPathSmuggling: framing RFC 9112 refuses, or which a proxy in
// front could read otherwise, is answered 400 and the connection closed,
// so that nothing after it is read as a request. fasthttp, left to
// itself, accepted Content-Length with Transfer-Encoding (and answered
// the smuggled request behind it), obs-fold, bare LFs and control
// characters in values.
func TestFastPathSmuggling(t *testing.T) {
	ts := startServer(t, echoBackend{})
	for name, raw := range smugglingCases {
		t.Run(name, func(t *testing.T) {
			got := exchange(t, ts.addr, nil, raw+smuggled)
			if len(got) != 1 || got[0].status != http.StatusBadRequest {
				var st []int
				for _, a := range got {
					st = append(st, a.status)
				}
				t.Fatalf("answers %v, want one 400 and the connection closed", st)
			}
		})
	}
}

// smuggled follows each of smugglingCases: answered, it was read as a
// request.
const smuggled = "GET /d/alice HTTP/1.1\r\nHost: x\r\n\r\n"

// smugglingCases are requests whose framing the fast path refuses.
var smugglingCases = map[string]string{
	"CL with TE":          "POST /d/_batch HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	"TE with CL":          "GET /d/alice HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n",
	"two CLs":             "POST /d/_batch HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 44\r\n\r\n",
	"two equal CLs":       "GET /names/alice HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n",
	"CL list":             "GET /names/alice HTTP/1.1\r\nHost: x\r\nContent-Length: 0, 0\r\n\r\n",
	"CL signed":           "GET /names/alice HTTP/1.1\r\nHost: x\r\nContent-Length: +0\r\n\r\n",
	"obs-fold":            "GET /names/alice HTTP/1.1\r\nHost: x\r\nX-A: b\r\n c\r\n\r\n",
	"obs-fold tab":        "GET /names/alice HTTP/1.1\r\nHost: x\r\nX-A: b\r\n\tTransfer-Encoding: chunked\r\n\r\n",
	"bare LF":             "GET /names/alice HTTP/1.1\r\nHost: x\nX-A: b\r\n\r\n",
	"bare LF ends fields": "GET /names/alice HTTP/1.1\r\nHost: x\r\n\n",
	"CR in value":         "GET /names/alice HTTP/1.1\r\nHost: x\r\nX-A: b\rc\r\n\r\n",
	"NUL in value":        "GET /names/alice HTTP/1.1\r\nHost: x\r\nX-A: b\x00c\r\n\r\n",
	"control in value":    "GET /names/alice HTTP/1.1\r\nHost: x\r\nX-A: b\x01c\r\n\r\n",
	"TE gzip":             "POST /d/_batch HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
	"TE identity":         "POST /d/_batch HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\n\r\n",
	"two TEs":             "POST /d/_batch HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	"space before colon":  "GET /d/alice HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n",
	"bad chunk size":      "POST /d/_batch HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
	"chunk size overflow": "POST /d/_batch HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffffff\r\nabc\r\n0\r\n\r\n",
	"two Hosts":           "GET /names/alice HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
	"no Host":             "GET /names/alice HTTP/1.1\r\n\r\n",
}

// TestFastPathConnectionLimit: MaxConns bounds the connections of both
// servers together: with one fast-path connection and one handed to
// net/http open, a third is not served until one of them closes.
func TestFastPathConnectionLimit(t *testing.T) {
	ts := startServer(t, wireBackend(), func(c *edge.Config) { c.MaxConns = 2 })
	ask := func(c net.Conn, path string) int {
		t.Helper()
		if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	fast, slow := dialWire(t, ts.addr, nil), dialWire(t, ts.addr, nil)
	defer fast.Close()
	defer slow.Close()
	if ask(fast, "/k/u") != 200 || ask(slow, "/livez") != 200 {
		t.Fatal("the first two connections were not served")
	}
	third := dialWire(t, ts.addr, nil) // the kernel's backlog takes it
	defer third.Close()
	if _, err := io.WriteString(third, "GET /k/u HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = third.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := third.Read(make([]byte, 1)); n != 0 || !isTimeout(err) {
		t.Fatalf("a third connection was served past MaxConns 2: %d bytes, %v", n, err)
	}
	slow.Close() // net/http's: its slot comes back
	_ = third.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(third), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the third connection once the second closed: %v", err)
	}
	resp.Body.Close()
}

// TestFastPathShutdownDrains: Shutdown lets a fast-path lookup in flight
// finish (its answer says Connection: close), closes an idle fast-path
// connection at once, and returns when both are gone.
func TestFastPathShutdownDrains(t *testing.T) {
	b := wireBackend()
	release, started := make(chan struct{}), make(chan struct{})
	b.get = func(ctx context.Context, db string, key []byte, opts node.GetOptions) (node.Result, error) {
		if string(key) == "slow" {
			close(started)
			<-release
		}
		return node.Result{Version: "v1", Found: true, Value: []byte("late")}, nil
	}
	srv, l, served := serveOnLoopback(t, b)
	addr := l.Addr().String()
	idle := dialWire(t, addr, nil)
	defer idle.Close()
	if _, err := io.WriteString(idle, "GET /k/u HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(idle)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	busy := dialWire(t, addr, nil)
	defer busy.Close()
	if _, err := io.WriteString(busy, "GET /k/slow HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	<-started
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(context.Background()) }()
	if _, err := br.ReadByte(); err == nil {
		t.Error("the idle connection got bytes, want it closed")
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) while a lookup was in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	resp, err = http.ReadResponse(bufio.NewReader(busy), nil)
	if err != nil {
		t.Fatalf("the lookup in flight: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "late" || !resp.Close {
		t.Errorf("the lookup in flight: %d %q close=%v, want 200 \"late\" and Connection: close", resp.StatusCode, body, resp.Close)
	}
	if err := <-done; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// startTLSTestServer serves b over HTTPS (a certificate of a CA made for
// the test) and returns the server and the CA's pool.
func startTLSTestServer(t *testing.T, b edge.Backend, opts ...func(*edge.Config)) (*testServer, *x509.CertPool) {
	t.Helper()
	ca := nodetest.NewCA(t)
	tc := tlsFiles(t, ca, t.TempDir(), 2)
	tc.Logger = nodetest.Logger()
	tl, err := edge.NewTLS(tc)
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, b, append(opts, func(c *edge.Config) { c.TLS = tl.ServerConfig() })...)
	ts.url, ts.client = "https://"+ts.addr, h2Client(ca, true)
	t.Cleanup(ts.client.CloseIdleConnections)
	return ts, ca.Pool
}

// TestFastPathHeaderLimit: a header section over MaxHeaderBytes is 431
// on the fast path as on net/http (a connection handed over first), and
// one within it is served by both.
func TestFastPathHeaderLimit(t *testing.T) {
	ts := startServer(t, wireBackend(), func(c *edge.Config) { c.MaxHeaderBytes = 1 << 10 })
	for _, tc := range []struct {
		pad  int
		want int
	}{{512, 200}, {16 << 10, 431}} {
		req := "GET /k/u HTTP/1.1\r\nHost: x\r\nX-Pad: " + strings.Repeat("p", tc.pad) + "\r\n\r\n"
		fast := exchange(t, ts.addr, nil, req)
		slow := exchange(t, ts.addr, nil, "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n"+req)
		if len(fast) != 1 || fast[0].status != tc.want || len(slow) != 2 || slow[1].status != tc.want {
			t.Errorf("%d bytes of header: fast path %v, net/http %v, want %d", tc.pad, fast, slow, tc.want)
		}
	}
}

// TestFastPathPanicLogged: a lookup whose handler panics on the fast
// path is answered 500, and its access log line says 500 (the line was
// written before the recovery, saying 200).
func TestFastPathPanicLogged(t *testing.T) {
	l, path := startAccessLog(t, nil, func(c *edge.AccessLogConfig) { c.Format = edge.AccessLogJSON })
	ts := startServer(t, panicky{newFake()}, func(c *edge.Config) { c.AccessLog = l })
	got := exchange(t, ts.addr, nil, "GET /d/boom HTTP/1.1\r\nHost: x\r\n\r\n")
	if len(got) != 1 || got[0].status != http.StatusInternalServerError {
		t.Fatalf("answers %v, want one 500", got)
	}
	flush(t, l)
	lines := decodeJSONLines(t, path)
	if len(lines) != 1 || lines[0].Status != http.StatusInternalServerError || lines[0].Bytes != int64(len("internal error\n")) {
		t.Fatalf("log %+v, want one line of a 500", lines)
	}
}
