package edge

// fastReadBuffer is the size of the fast path's read buffer (fasthttp's
// ReadBufferSize), held by each of its connections for the connection's
// life: net/http reads header sections through 4 KiB too. A request
// whose header section is longer is handed to net/http (fastError),
// which reads it up to max_header_bytes.
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
