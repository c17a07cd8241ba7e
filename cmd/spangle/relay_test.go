package main

import (
	"io"
	"net"
	"sync"
	"testing"
)

// relay is a TCP relay on loopback between a leafnode and its hub, which
// a test cuts (every connection closed, new ones refused) and restores.
type relay struct {
	ln     net.Listener
	target string

	mu    sync.Mutex // guards cut and conns
	cut   bool
	conns map[net.Conn]struct{}

	wg sync.WaitGroup // the accept loop and the copies
}

// startRelay relays a random loopback port to target until the test ends.
func startRelay(t *testing.T, target string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	r.wg.Go(r.accept)
	t.Cleanup(func() {
		ln.Close()
		r.setCut(true)
		r.wg.Wait()
	})
	return r
}

// addr is the relay's host:port.
func (r *relay) addr() string { return r.ln.Addr().String() }

func (r *relay) accept() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		cut := r.cut
		r.mu.Unlock()
		if cut {
			c.Close()
			continue
		}
		d, err := net.Dial("tcp", r.target)
		if err != nil {
			c.Close()
			continue
		}
		r.mu.Lock()
		if r.cut { // cut meanwhile
			r.mu.Unlock()
			c.Close()
			d.Close()
			continue
		}
		r.conns[c], r.conns[d] = struct{}{}, struct{}{}
		r.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			io.Copy(dst, src)
			dst.Close()
			src.Close()
			r.mu.Lock()
			delete(r.conns, dst)
			delete(r.conns, src)
			r.mu.Unlock()
		}
		r.wg.Go(func() { pipe(d, c) })
		r.wg.Go(func() { pipe(c, d) })
	}
}

// setCut cuts the link (closing every relayed connection) or restores it.
func (r *relay) setCut(cut bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cut = cut
	if cut {
		for c := range r.conns {
			c.Close()
		}
	}
}
