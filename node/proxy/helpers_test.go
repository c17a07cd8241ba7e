package proxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spangledb/spangle/node/batchwire"
	"github.com/spangledb/spangle/node/nodetest"
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
// The request body (a batch) is read before h runs: net/http notices a
// client that went away, and cancels the request's context, only once
// the body has been read to its end.
func startPeer(t testing.TB, h http.HandlerFunc) *testPeer {
	t.Helper()
	p := &testPeer{}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.hits.Add(1)
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
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
// as sequins' proxy_test), changed by edit. On cleanup it
// shuts the Proxy down and checks that no flight is left.
func newProxy(t testing.TB, edit func(*Config)) *Proxy {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Timeout, cfg.StageTimeout = 300*time.Millisecond, 100*time.Millisecond
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

// kvPeer is a spangle-like peer for version v over data: it answers
// GET /<db>/<key>?proxy=v (200, or 404 for a key not in data) and
// POST /<db>/_batch?proxy=v (edge/BATCH.md), and any other version
// with 501; with v "*", every version holds data. keys, if not nil,
// receives the number of keys of each request (1 for a GET) before it
// is answered. before, if not nil, runs first, and may answer instead
// (returning true).
type kvPeer struct {
	v      string
	data   map[string]string
	fill   string // if set, the value of every key not in data
	keys   chan int
	before func(w http.ResponseWriter, r *http.Request, keys []string) bool
}

func (kv *kvPeer) serve(w http.ResponseWriter, r *http.Request) {
	_, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	v := r.URL.Query().Get("proxy")
	if kv.v != "*" && v != kv.v {
		w.WriteHeader(http.StatusNotImplemented)
		return
	}
	var keys []string
	batch := r.Method == http.MethodPost && rest == "_batch"
	if batch {
		body, err := io.ReadAll(r.Body)
		if err == nil {
			keys, err = decodeTestBatchRequest(body)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	} else {
		keys = []string{rest}
	}
	if kv.keys != nil {
		kv.keys <- len(keys)
	}
	if kv.before != nil && kv.before(w, r, keys) {
		return
	}
	w.Header().Set(hdrVersion, v)
	if !batch {
		val, ok := kv.value(keys[0])
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		_, _ = io.WriteString(w, val)
		return
	}
	reply := batchwire.AppendReplyHeader(nil, v, "", len(keys))
	for _, k := range keys {
		val, ok := kv.value(k)
		if !ok {
			reply = batchwire.AppendItem(reply, batchwire.Missing, nil)
			continue
		}
		reply = batchwire.AppendItem(reply, batchwire.Found, []byte(val))
	}
	w.Header().Set("Content-Type", batchContentType)
	_, _ = w.Write(reply)
}

func (kv *kvPeer) value(key string) (string, bool) {
	if v, ok := kv.data[key]; ok {
		return v, true
	}
	return kv.fill, kv.fill != ""
}

// decodeTestBatchRequest decodes a batch request (edge/BATCH.md).
func decodeTestBatchRequest(b []byte) ([]string, error) {
	rest, ok := bytes.CutPrefix(b, []byte("SBQ\x01"))
	if !ok {
		return nil, fmt.Errorf("not a batch request: %q", b)
	}
	n, w := binary.Uvarint(rest)
	if w <= 0 {
		return nil, fmt.Errorf("bad count in %q", b)
	}
	rest = rest[w:]
	keys := make([]string, 0, n)
	for range n {
		l, w := binary.Uvarint(rest)
		if w <= 0 || uint64(len(rest)-w) < l {
			return nil, fmt.Errorf("bad key in %q", b)
		}
		keys = append(keys, string(rest[w:w+int(l)]))
		rest = rest[w+int(l):]
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%d bytes after the keys", len(rest))
	}
	return keys, nil
}

// checkFor polls cond until it holds, failing t after timeout.
func checkFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	nodetest.WaitFor(t, timeout, what, nodetest.True(cond))
}

// queued returns the number of attempts waiting in p's queue for peer.
func queued(p *Proxy, peer string) int {
	p.peersMu.Lock()
	defer p.peersMu.Unlock()
	pr := p.peers[peer]
	if pr == nil {
		return 0
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return len(pr.queue)
}
