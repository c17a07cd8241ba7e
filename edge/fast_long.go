package edge

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// fastReadBuffer is the size of the fast path's read buffer (fasthttp's
// ReadBufferSize), held by each of its connections for the connection's
// life: net/http reads header sections through 4 KiB too. A request
// whose header section is longer is handed to net/http (fastError,
// readLong), which reads it up to max_header_bytes.
const fastReadBuffer = 4096

// readTail keeps the last len(buf) bytes a prefixConn's Read returned.
// When fasthttp fails a request with ErrSmallBuffer its read buffer was
// full of the request's beginning, the last bytes it read, and it has
// released the buffer: the tail holds them still, for net/http.
type readTail struct {
	buf   []byte
	total int // bytes kept since the start
}

// add keeps p, the bytes just returned.
func (t *readTail) add(p []byte) {
	n := len(t.buf)
	if len(p) >= n {
		copy(t.buf, p[len(p)-n:])
		t.total = n // the next add starts at 0 again
		return
	}
	at := t.total % n
	if k := copy(t.buf[at:], p); k < len(p) {
		copy(t.buf, p[k:])
	}
	t.total += len(p)
	if t.total >= 2*n {
		t.total = n + t.total%n // bounded; full, the same position
	}
}

// full reports whether the tail holds len(buf) bytes.
func (t *readTail) full() bool { return len(t.buf) > 0 && t.total >= len(t.buf) }

// bytes returns the bytes kept, oldest first, in a new slice.
func (t *readTail) bytes() []byte {
	n := len(t.buf)
	if t.total < n {
		return append([]byte(nil), t.buf[:t.total]...)
	}
	at := t.total % n
	return append(append(make([]byte, 0, n), t.buf[at:]...), t.buf[:at]...)
}

// readLong reads the rest of the header section of pc's request, whose
// beginning fasthttp read and gave up on (fastError), and refuses what
// badFraming refuses, as the fast path does any request: 400 and the
// connection closed. It returns whether net/http is to serve pc, with
// the request's bytes read so far first: it answers a section over its
// max_header_bytes 431.
func (s *Server) readLong(pc *prefixConn) bool {
	b := append(pc.tail.bytes(), pc.buf...)
	pc.tail, pc.buf = readTail{}, nil
	limit := s.http.MaxHeaderBytes + 4096 // net/http's, with its slack
	_ = pc.Conn.SetReadDeadline(time.Now().Add(s.http.ReadHeaderTimeout))
	end := sectionEnd(b)
	var err error
	for end < 0 && len(b) <= limit && err == nil {
		b = slices.Grow(b, 4096)
		var n int
		n, err = pc.Conn.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		end = sectionEnd(b)
	}
	_ = pc.Conn.SetReadDeadline(time.Time{})
	if end < 0 && err != nil {
		_ = pc.Close() // gone, or silent past the header timeout
		return false
	}
	pc.buf = b
	if end >= 0 {
		_, fields, _ := bytes.Cut(bytes.TrimLeft(b[:end], "\r\n"), []byte{'\n'})
		if msg, _ := badFraming(fields); msg != "" {
			s.refuseLong(pc, msg)
			return false
		}
	}
	return true
}

// refuseLong answers 400 to a header section readLong read and
// badFraming refuses, with the fields refuseFast's answer has (fasthttp
// no longer holds the connection to write it), and closes pc.
func (s *Server) refuseLong(pc *prefixConn, msg string) {
	s.fastRefused.Inc()
	body := "400 Bad Request: " + msg
	_, _ = io.WriteString(pc.Conn, "HTTP/1.1 400 Bad Request\r\n"+
		"Date: "+time.Now().UTC().Format(http.TimeFormat)+"\r\n"+
		hdrContentType+": "+valText[0]+"\r\n"+
		hdrNoSniff+": "+valNoSniff[0]+"\r\n"+
		hdrContentLength+": "+strconv.Itoa(len(body))+"\r\n"+
		"Connection: close\r\n\r\n"+body)
	_ = pc.CloseWrite()
	_ = pc.Close()
}

// sectionEnd returns the length of b's request up to the empty line
// ending its header section (empty lines before the request line
// skipped), -1 if b holds no such line.
func sectionEnd(b []byte) int {
	skip := len(b) - len(bytes.TrimLeft(b, "\r\n"))
	rest := b[skip:]
	i, j := bytes.Index(rest, []byte("\n\r\n")), bytes.Index(rest, []byte("\n\n"))
	switch {
	case i >= 0 && (j < 0 || i < j):
		return skip + i + 3
	case j >= 0:
		return skip + j + 2
	}
	return -1
}
