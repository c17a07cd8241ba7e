package proxy

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testPeer is a real HTTP peer on loopback.
type testPeer struct {
	srv  *httptest.Server
	addr string       // host:port
	hits atomic.Int32 // requests received
	conn atomic.Int32 // connections accepted
}

// startPeer starts a peer running h. Handlers that block must also
// return when their request's context is done: Close waits for them.
func startPeer(t testing.TB, h http.HandlerFunc) *testPeer {
	t.Helper()
	p := &testPeer{}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.hits.Add(1)
		h(w, r)
	}))
	p.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			p.conn.Add(1)
		}
	}
	p.srv.Start()
	t.Cleanup(p.srv.Close)
	p.addr = strings.TrimPrefix(p.srv.URL, "http://")
	return p
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// value answers 200 with body and the version header v.
func value(v, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(hdrVersion, v)
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("ETag", `"abc"`)
		_, _ = w.Write([]byte(body))
	}
}

// status answers code with no body.
func status(code int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(code) }
}

// hang blocks until the request is cancelled or release is closed.
func hang(release <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}
}

// newRelease returns a channel closed when the test ends (before its
// peers close, so that hanging handlers return).
func newRelease(t testing.TB) chan struct{} {
	t.Helper()
	ch := make(chan struct{})
	t.Cleanup(func() { close(ch) })
	return ch
}

// attempts records OnAttempt calls.
type attempts struct {
	mu    sync.Mutex
	peers []string
}

func (a *attempts) record(peer string) {
	a.mu.Lock()
	a.peers = append(a.peers, peer)
	a.mu.Unlock()
}

func (a *attempts) list() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.peers...)
}

// newProxy returns a Proxy with test timeouts (Timeout 300ms, stage 100ms
// as sequins' proxy_test, cache off), changed by edit. On cleanup it
// shuts the Proxy down and checks that no flight is left.
func newProxy(t testing.TB, edit func(*Config)) *Proxy {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Timeout, cfg.StageTimeout, cfg.CacheSize = 300*time.Millisecond, 100*time.Millisecond, 0
	if edit != nil {
		edit(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if len(p.flights) != 0 {
			t.Errorf("%d flights left after Shutdown", len(p.flights))
		}
	})
	return p
}

func get(p *Proxy, key string, peers ...string) (Response, error) {
	return p.Get(context.Background(), Request{DB: "db", Version: "v1", Key: []byte(key), Peers: peers})
}
