package edge_test

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// FuzzFastPathRequest writes arbitrary bytes to a server's HTTP/1.1 port
// (the fast path, and net/http behind it) and checks that: no handler
// panics; what comes back is HTTP/1.1 answers; a first request whose
// field section names both Content-Length and Transfer-Encoding is
// answered 400 (nothing after it is read as a request); and the server
// still answers a lookup afterwards. The seeds (run by go test) are the
// smuggling cases and well-formed requests; go test -fuzz
// FuzzFastPathRequest ./edge explores from them.
func FuzzFastPathRequest(f *testing.F) {
	for _, s := range []string{
		"GET /k/u HTTP/1.1\r\nHost: x\r\n\r\n",
		"HEAD /k/u HTTP/1.1\r\nHost: x\r\n\r\nGET /k/a%2Fb HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /livez HTTP/1.1\r\nHost: x\r\n\r\nGET /k/u HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /d/_batch HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /k/u HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /k/u HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
		"GET /k/u HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n",
		"GET /k/u HTTP/1.1\nHost: x\n\n",
		"POST /d/_batch HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"GET /k/u HTTP/1.1\r\nHost: x\r\nX: a\rb\r\n\r\n",
		"GET /k/%zz?raw=1&x HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET http://x/k/u HTTP/1.1\r\nHost: x\r\n\r\n",
		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	ts := startServer(f, wireBackend())
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := c.Write(in); err == nil {
			_ = c.(*net.TCPConn).CloseWrite()
		}
		out, _ := io.ReadAll(c)
		if len(out) > 0 && !bytes.HasPrefix(out, []byte("HTTP/1.")) {
			t.Fatalf("answered %q", out[:min(len(out), 64)])
		}
		if namesBoth(in) && len(out) > 0 && !bytes.HasPrefix(out, []byte("HTTP/1.1 400 ")) {
			t.Fatalf("Content-Length with Transfer-Encoding answered %q", out[:min(len(out), 64)])
		}
		if n := counterOf(t, ts.registry, "spangle_panics_total", "door", "http"); n != 0 {
			t.Fatalf("%v panics", n)
		}
		if got := exchange(t, ts.addr, nil, "GET /k/u HTTP/1.1\r\nHost: x\r\n\r\n"); len(got) != 1 || got[0].body != "plain" {
			t.Fatalf("a lookup afterwards: %v", got)
		}
	})
}

// namesBoth reports whether the first request's field section (up to
// the first empty line) has both a Content-Length and a
// Transfer-Encoding field, for a request net/http would not take first
// (not PRI).
func namesBoth(in []byte) bool {
	head, _, ok := bytes.Cut(in, []byte("\r\n\r\n"))
	if !ok || bytes.HasPrefix(in, []byte("PRI ")) {
		return false
	}
	var cl, te bool
	lines := strings.Split(string(head), "\r\n")
	for _, l := range lines[1:] {
		name, _, _ := strings.Cut(l, ":")
		cl = cl || strings.EqualFold(name, "Content-Length")
		te = te || strings.EqualFold(name, "Transfer-Encoding")
	}
	return cl && te
}
