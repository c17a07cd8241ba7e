package edge_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/spangledb/spangle/node/nodetest"
)

// h2Raw is a client's HTTP/2 connection over TLS that writes frames as
// a test asks, whatever a well-behaved client would: the tool of the
// abuse tests (held streams, rapid reset).
type h2Raw struct {
	conn *tls.Conn
	fr   *http2.Framer
	hbuf bytes.Buffer
	enc  *hpack.Encoder
}

// dialH2 opens an HTTP/2 connection to addr (ALPN h2, trusting ca) and
// sends the preface and an empty SETTINGS frame; the server's frames are
// left for the test to read (or not).
func dialH2(t testing.TB, ca *nodetest.CA, addr string) *h2Raw {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN %q, want h2", p)
	}
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	h := &h2Raw{conn: c, fr: http2.NewFramer(c, c)}
	h.enc = hpack.NewEncoder(&h.hbuf)
	if err := h.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return h
}

// headers writes a HEADERS frame opening stream id: method path, with
// the fields given as name, value pairs; endStream when no body follows.
func (h *h2Raw) headers(id uint32, method, path string, endStream bool, fields ...string) error {
	h.hbuf.Reset()
	for _, f := range [][2]string{{":method", method}, {":scheme", "https"}, {":authority", "127.0.0.1"}, {":path", path}} {
		h.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for i := 0; i+1 < len(fields); i += 2 {
		h.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.hbuf.Bytes(),
		EndStream: endStream, EndHeaders: true})
}

// readUntilClosed reads the server's frames until the connection ends
// or d passes, and returns whether it ended and the GOAWAY's error code,
// if one came.
func (h *h2Raw) readUntilClosed(d time.Duration) (closed bool, goaway *http2.GoAwayFrame) {
	h.conn.SetReadDeadline(time.Now().Add(d))
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			return err == io.EOF || !isTimeout(err), goaway
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			goaway = g
		}
	}
}

// isTimeout reports whether err is a deadline's.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
