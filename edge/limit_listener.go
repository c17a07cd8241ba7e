package edge

import (
	"net"
	"sync"
)

// limitListener accepts at most n connections at once: Accept waits for
// one to close before it takes the next from the kernel's backlog. It is
// netutil.LimitListener's idea, with connections that keep CloseWrite:
// net/http half-closes a connection after an error answer (431, 413…) so
// that the client reads it before the close, and an RST would lose it.
type limitListener struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func newLimitListener(l net.Listener, n int) *limitListener {
	return &limitListener{Listener: l, sem: make(chan struct{}, n), done: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	lc := &limitConn{Conn: c, l: l}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return &limitConnCW{limitConn: lc, cw: cw}, nil
	}
	return lc, nil
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitConn gives its slot back once, on Close.
type limitConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { <-c.l.sem })
	return err
}

// limitConnCW is a limitConn over a connection that can half-close.
type limitConnCW struct {
	*limitConn
	cw interface{ CloseWrite() error }
}

func (c *limitConnCW) CloseWrite() error { return c.cw.CloseWrite() }
