package edge_test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spangledb/spangle/edge"
)

// The fast path reads header sections through a 4 KiB buffer: a longer
// one is handed to net/http with the bytes fasthttp read (fast_tail.go),
// and answered as before, up to MaxHeaderBytes.

// longGET returns a GET of /k/u whose request line and header section
// are n bytes long.
func longGET(n int) string {
	const head, tail = "GET /k/u HTTP/1.1\r\nHost: x\r\nX-Pad: ", "\r\n\r\n"
	return head + strings.Repeat("p", n-len(head)-len(tail)) + tail
}

// TestFastPathLongHeader: a GET whose header section is longer than the
// fast path's read buffer, within MaxHeaderBytes, is answered 200 with
// the value, after 0 to 3 small requests on the same connection (the
// bytes read wrapping around the tail at other offsets) and before
// another; one over MaxHeaderBytes (net/http's, with its 4 KiB of
// slack) is 431; over clear text and TLS. Without the hand-over the
// ones over 4 KiB were 431.
func TestFastPathLongHeader(t *testing.T) {
	const small = "GET /k/a%2Fb HTTP/1.1\r\nHost: x\r\n\r\n"
	run := func(t *testing.T, ts *testServer, tc *tls.Config) {
		for _, n := range []int{4095, 4096, 4097, 4096 + len(small), 9000, 64<<10 - 100, 64<<10 + 8192} {
			for before := range 4 {
				raw := strings.Repeat(small, before) + longGET(n) + "GET /k/u HTTP/1.1\r\nHost: x\r\n\r\n"
				got := exchange(t, ts.addr, tc, raw)
				want := before + 2
				if n > 64<<10 {
					want = before + 1 // 431 closes the connection
				}
				if len(got) != want {
					t.Fatalf("%d bytes after %d requests: %d answers %v, want %d", n, before, len(got), got, want)
				}
				for i, a := range got {
					status, body := 200, "plain"
					switch {
					case i < before:
						body = "slash"
					case i == before && n > 64<<10:
						status, body = 431, ""
					}
					if a.status != status || (status == 200 && a.body != body) {
						t.Errorf("%d bytes after %d requests: answer %d: %d %q, want %d %q", n, before, i, a.status, a.body, status, body)
					}
				}
			}
		}
		if n := counterOf(t, ts.registry, "spangle_http_refused_total"); n != 0 {
			t.Errorf("%v requests refused by the fast path, want 0 (net/http answers 431)", n)
		}
	}
	t.Run("http", func(t *testing.T) {
		run(t, startServer(t, wireBackend()), nil)
	})
	t.Run("https", func(t *testing.T) {
		ts, ca := startTLSTestServer(t, wireBackend())
		run(t, ts, &tls.Config{RootCAs: ca, NextProtos: []string{"http/1.1"}})
	})
}

// TestFastPathLongHeaderKeepAlive: on one connection, requests written
// one at a time: a lookup on the fast path, a long one (handed over),
// then more lookups served on the same connection by net/http; one
// connection counted, handed over once.
func TestFastPathLongHeaderKeepAlive(t *testing.T) {
	ts := startServer(t, wireBackend())
	c := dialWire(t, ts.addr, nil)
	defer c.Close()
	br := bufio.NewReader(c)
	for i, req := range []string{longGET(100), longGET(5000), longGET(100), longGET(20000), longGET(100)} {
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "plain" || resp.Close {
			t.Fatalf("request %d: %d %q close=%v", i, resp.StatusCode, body, resp.Close)
		}
	}
	if n := counterOf(t, ts.registry, "spangle_http_handovers_total"); n != 1 {
		t.Errorf("%v connections handed over, want 1", n)
	}
	if n := counterOf(t, ts.registry, "spangle_http_connections_total", "server", "fast"); n != 1 {
		t.Errorf("%v fast connections, want 1", n)
	}
}

// TestFastPathLongHeaderSmuggling: each of TestFastPathSmuggling's
// requests with a field of 5000 bytes before its own (a header section
// longer than the read buffer, handed to net/http), and with empty lines
// before it, is answered 400 or 501 (net/http's answer to a
// Transfer-Encoding it does not know) and the connection closed: nothing
// after it is read as a request. Without readLong's framing check,
// obs-fold, bare LFs, Content-Length with Transfer-Encoding and two
// Content-Lengths were answered, and the request behind them too.
func TestFastPathLongHeaderSmuggling(t *testing.T) {
	ts := startServer(t, echoBackend{})
	pad := "X-Pad: " + strings.Repeat("p", 5000) + "\r\n"
	for name, raw := range smugglingCases {
		line, rest, _ := strings.Cut(raw, "\r\n")
		for _, before := range []string{"", "\r\n\r\n"} {
			t.Run(name, func(t *testing.T) {
				got := exchange(t, ts.addr, nil, before+line+"\r\n"+pad+rest+smuggled)
				if len(got) != 1 || got[0].status != http.StatusBadRequest && got[0].status != http.StatusNotImplemented {
					var st []int
					for _, a := range got {
						st = append(st, a.status)
					}
					t.Fatalf("answers %v, want one 400 (or 501) and the connection closed", st)
				}
			})
		}
	}
}

// TestFastPathLongHeaderSlowloris: a header section longer than the
// read buffer, its first 5000 bytes sent at once and the rest a byte at
// a time, is cut off under the header timeout (once on the fast path,
// once more while readLong reads it), not served.
func TestFastPathLongHeaderSlowloris(t *testing.T) {
	const timeout = 100 * time.Millisecond
	ts := startServer(t, wireBackend(), func(c *edge.Config) { c.ReadHeaderTimeout = timeout })
	start := time.Now()
	conn := dialWire(t, ts.addr, nil)
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /k/u HTTP/1.1\r\nHost: x\r\nX-Pad: "+strings.Repeat("p", 5000)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 512)
	for {
		if time.Since(start) > 10*time.Second {
			t.Fatal("server did not close a slow connection")
		}
		if _, err := conn.Write([]byte{'p'}); err != nil {
			break // closed
		}
		// A read that times out: still open, send the next byte.
		_ = conn.SetReadDeadline(time.Now().Add(2 * timeout / 5))
		n, err := conn.Read(buf)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			continue
		}
		if n > 0 && !strings.HasPrefix(string(buf[:n]), "HTTP/1.1 4") {
			t.Fatalf("unexpected answer %q", buf[:n])
		}
		break
	}
	if elapsed := time.Since(start); elapsed < timeout {
		t.Errorf("closed after %v, before ReadHeaderTimeout %v", elapsed, timeout)
	}
}

// TestFastPathLongHeaderRefusedAlike: a request badFraming refuses is
// answered alike whether its header section fits the read buffer
// (refuseFast) or is longer (readLong): the same status, fields (a Date
// in both) and body. (Two Content-Lengths differ: fasthttp refuses a
// short one itself, with a bare 400.)
func TestFastPathLongHeaderRefusedAlike(t *testing.T) {
	ts := startServer(t, echoBackend{})
	pad := "X-Pad: " + strings.Repeat("p", 5000) + "\r\n"
	for _, name := range []string{"obs-fold", "bare LF", "TE with CL"} {
		raw := smugglingCases[name]
		line, rest, _ := strings.Cut(raw, "\r\n")
		short := exchange(t, ts.addr, nil, raw)
		long := exchange(t, ts.addr, nil, line+"\r\n"+pad+rest)
		if len(short) != 1 || len(long) != 1 {
			t.Fatalf("%s: %d and %d answers, want one each", name, len(short), len(long))
		}
		s, l := short[0], long[0]
		if s.header.Get("Date") == "" || l.header.Get("Date") == "" {
			t.Errorf("%s: Date %q and %q, want one in each", name, s.header.Get("Date"), l.header.Get("Date"))
		}
		s.header.Del("Date") // HTTP-dates: readAnswers checked them
		l.header.Del("Date")
		if s.status != l.status || s.body != l.body || !reflect.DeepEqual(s.header, l.header) {
			t.Errorf("%s: short header answered %d %v %q, long %d %v %q", name, s.status, s.header, s.body, l.status, l.header, l.body)
		}
	}
}
