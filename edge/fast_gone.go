package edge

import (
	"context"
	"sync"
	"time"
)

// goneWatch is a fast-path request's context (the lookup's): it ends
// when Shutdown gives up (base), and when the client goes away while
// something waits on it. net/http learns the latter from a read it keeps
// pending on every connection; here that read starts only when Done is
// first called — a local lookup never calls it, a proxied one waiting on
// a peer does — and release stops it once the request is answered. One
// per connection (prefixConn), reused request after request: a request
// allocates nothing for it.
type goneWatch struct {
	pc   *prefixConn
	base context.Context

	mu       sync.Mutex
	done     chan struct{} // nil until Done
	err      error         // set when done is closed
	stopBase func() bool   // context.AfterFunc's, while watching
	reading  bool          // the read is pending
	stopping bool          // release interrupts it
	read     sync.WaitGroup
}

func (g *goneWatch) Deadline() (time.Time, bool) { return g.base.Deadline() }
func (g *goneWatch) Value(key any) any           { return g.base.Value(key) }

func (g *goneWatch) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err != nil {
		return g.err
	}
	return g.base.Err()
}

func (g *goneWatch) Done() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done == nil {
		g.done = make(chan struct{})
		if err := g.base.Err(); err != nil {
			g.endLocked(err)
			return g.done
		}
		g.stopBase = context.AfterFunc(g.base, func() { g.end(g.base.Err()) })
		// No deadline: a slow lookup is not a client gone (fasthttp's
		// header timeout still stands on the connection).
		_ = g.pc.Conn.SetReadDeadline(time.Time{})
		g.reading = true
		g.read.Add(1)
		go g.watch()
	}
	return g.done
}

// watch reads the connection as net/http's background read does: an
// error is the client gone; a byte is the next request, which the
// connection gives fasthttp first (prefixConn), and the client is not
// gone.
func (g *goneWatch) watch() {
	defer g.read.Done()
	var b [1]byte
	n, err := g.pc.Conn.Read(b[:])
	g.mu.Lock()
	g.reading = false
	stopping := g.stopping
	g.mu.Unlock()
	if n > 0 {
		g.pc.buf = append(g.pc.buf, b[0])
	}
	if err != nil && !stopping {
		g.end(context.Canceled)
	}
}

func (g *goneWatch) end(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.endLocked(err)
}

func (g *goneWatch) endLocked(err error) {
	if g.done != nil && g.err == nil { // nil: an AfterFunc of a request released
		g.err = err
		close(g.done)
	}
}

// release ends the watch of the request answered (its read interrupted
// and waited for) and readies g for the connection's next request.
func (g *goneWatch) release() {
	g.mu.Lock()
	if g.done == nil {
		g.mu.Unlock()
		return
	}
	g.stopping = true
	if g.reading {
		_ = g.pc.Conn.SetReadDeadline(time.Unix(1, 0)) // in the past: the read returns
	}
	g.mu.Unlock()
	g.read.Wait()
	if g.stopBase != nil {
		g.stopBase()
	}
	// fasthttp sets the next request's deadline before its read.
	_ = g.pc.Conn.SetReadDeadline(time.Time{})
	// Under mu: an AfterFunc stopBase came too late to stop may be
	// running end now.
	g.mu.Lock()
	g.done, g.err, g.stopBase, g.stopping = nil, nil, nil, false
	g.mu.Unlock()
}
