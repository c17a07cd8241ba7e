package proxy

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestGetSinglePeer(t *testing.T) {
	peer := startPeer(t, value("v1", "all good"))
	p := newProxy(t, nil)
	res, err := get(p, "k", peer.addr)
	if err != nil {
		t.Fatal(err)
	}
	want := Response{Status: 200, Body: []byte("all good"), Version: "v1", ContentType: "text/plain", ETag: `"abc"`, Peer: peer.addr}
	if res.Status != want.Status || string(res.Body) != string(want.Body) || res.Version != want.Version ||
		res.ContentType != want.ContentType || res.ETag != want.ETag || res.Peer != want.Peer {
		t.Fatalf("got %+v, want %+v", res, want)
	}
}

func TestGetNotFound(t *testing.T) {
	t.Run("404 is an answer", func(t *testing.T) {
		peer := startPeer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(hdrVersion, "v1")
			w.WriteHeader(http.StatusNotFound)
		})
		res, err := get(newProxy(t, nil), "k", peer.addr)
		if err != nil || res.Status != 404 || res.Version != "v1" || res.Peer != peer.addr {
			t.Fatalf("got %+v, %v", res, err)
		}
	})
	t.Run("404 wins over a slow 200", func(t *testing.T) {
		release := newRelease(t)
		var seq atomic.Int32
		notFoundFrom := make(chan string, 1)
		h := func(w http.ResponseWriter, r *http.Request) {
			if seq.Add(1) == 1 {
				notFoundFrom <- r.Host
				status(http.StatusNotFound)(w, r)
				return
			}
			hang(release)(w, r)
		}
		a, b := startPeer(t, h), startPeer(t, h)
		p := newProxy(t, func(c *Config) { c.StageTimeout = time.Millisecond })
		res, err := get(p, "k", a.addr, b.addr)
		if err != nil || res.Status != 404 || res.Peer != <-notFoundFrom {
			t.Fatalf("got %+v, %v", res, err)
		}
	})
}

// TestGetSlowPeer: the first peer tried hangs; a backup attempt starts on
// the second after StageTimeout and wins; the third is never tried.
func TestGetSlowPeer(t *testing.T) {
	release := newRelease(t)
	var seq atomic.Int32
	answeredBy := make(chan string, 1)
	h := func(w http.ResponseWriter, r *http.Request) {
		switch seq.Add(1) {
		case 1:
			hang(release)(w, r)
		case 2:
			answeredBy <- r.Host
			value("v1", "all good")(w, r)
		default:
			t.Error("a third peer was tried")
		}
	}
	peers := []string{startPeer(t, h).addr, startPeer(t, h).addr, startPeer(t, h).addr}
	var at attempts
	p := newProxy(t, func(c *Config) { c.OnAttempt = at.record })
	start := time.Now()
	res, err := get(p, "k", peers...)
	if err != nil || string(res.Body) != "all good" {
		t.Fatalf("got %+v, %v", res, err)
	}
	tried := at.list()
	if len(tried) != 2 || res.Peer != <-answeredBy {
		t.Fatalf("attempts %v, answer from %s: want 2 attempts, the second answering", tried, res.Peer)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("answered after %v, before the stage timeout", d)
	}
}

// TestGetErrorPeerNextAtOnce: a failed attempt starts the next one at
// once, not after the stage timeout (set far beyond the test's length).
func TestGetErrorPeerNextAtOnce(t *testing.T) {
	var seq atomic.Int32
	h := func(w http.ResponseWriter, r *http.Request) {
		if seq.Add(1) <= 2 {
			status(http.StatusInternalServerError)(w, r)
			return
		}
		value("v1", "third time")(w, r)
	}
	peers := []string{startPeer(t, h).addr, startPeer(t, h).addr, startPeer(t, h).addr, startPeer(t, h).addr}
	var at attempts
	p := newProxy(t, func(c *Config) { c.Timeout, c.StageTimeout, c.OnAttempt = time.Minute, time.Minute, at.record })
	start := time.Now()
	res, err := get(p, "k", peers...)
	if err != nil || string(res.Body) != "third time" || len(at.list()) != 3 {
		t.Fatalf("got %+v, %v after attempts %v", res, err, at.list())
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %v: the next attempt waited for the stage timeout", d)
	}
}

func TestGetConnectionRefused(t *testing.T) {
	good := startPeer(t, value("v1", "ok"))
	peers := []string{closedAddr(t), closedAddr(t), good.addr, closedAddr(t)}
	p := newProxy(t, func(c *Config) { c.Timeout, c.StageTimeout = time.Minute, time.Minute })
	res, err := get(p, "k", peers...)
	if err != nil || res.Peer != good.addr {
		t.Fatalf("got %+v, %v", res, err)
	}
}

// TestGetSlowThenError: the first peer is slow, the backup fails; the
// slow one's answer still wins.
func TestGetSlowThenError(t *testing.T) {
	failed := make(chan struct{})
	slowHost := make(chan string, 1)
	var seq atomic.Int32
	h := func(w http.ResponseWriter, r *http.Request) {
		if seq.Add(1) == 1 {
			slowHost <- r.Host
			select {
			case <-failed:
				value("v1", "sorry to keep you waiting")(w, r)
			case <-r.Context().Done():
			}
			return
		}
		status(http.StatusInternalServerError)(w, r)
		close(failed)
	}
	peers := []string{startPeer(t, h).addr, startPeer(t, h).addr}
	p := newProxy(t, nil)
	res, err := get(p, "k", peers...)
	if err != nil || string(res.Body) != "sorry to keep you waiting" || res.Peer != <-slowHost {
		t.Fatalf("got %+v, %v", res, err)
	}
}

// TestGetTimeout: every peer hangs: attempts at 0, 100 and 200ms, then
// ErrTimeout at 300ms, and no fourth attempt.
func TestGetTimeout(t *testing.T) {
	release := newRelease(t)
	slow := startPeer(t, hang(release))
	var at attempts
	p := newProxy(t, func(c *Config) { c.OnAttempt = at.record })
	start := time.Now()
	_, err := get(p, "k", slow.addr, slow.addr, slow.addr, slow.addr)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("timed out after %v, before Timeout", d)
	}
	if n := len(at.list()); n != 3 {
		t.Fatalf("%d attempts, want 3", n)
	}
}

func TestGetAllErrors(t *testing.T) {
	bad := startPeer(t, status(http.StatusInternalServerError))
	var at attempts
	p := newProxy(t, func(c *Config) { c.OnAttempt = at.record })
	_, err := get(p, "k", bad.addr, bad.addr, bad.addr)
	if !errors.Is(err, ErrNoReplica) || !errors.Is(err, errStatus) {
		t.Fatalf("err = %v, want ErrNoReplica wrapping the 500", err)
	}
	if len(at.list()) != 3 || bad.hits.Load() != 3 {
		t.Fatalf("%d attempts, %d hits; want 3", len(at.list()), bad.hits.Load())
	}
}

func TestGetNoPeers(t *testing.T) {
	if _, err := get(newProxy(t, nil), "k"); !errors.Is(err, ErrNoReplica) {
		t.Fatalf("err = %v, want ErrNoReplica", err)
	}
}

func TestGetInvalid(t *testing.T) {
	p := newProxy(t, nil)
	for _, req := range []Request{
		{Version: "v", Key: []byte("k"), Peers: []string{"x:1"}},
		{DB: "db", Key: []byte("k"), Peers: []string{"x:1"}},
		{DB: "db", Version: "v", Peers: []string{"x:1"}},
	} {
		if _, err := p.Get(context.Background(), req); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("Get(%+v) = %v, want ErrInvalidRequest", req, err)
		}
	}
	// A malformed peer address fails its attempt, not the process.
	good := startPeer(t, value("v1", "ok"))
	res, err := get(newProxy(t, func(c *Config) { c.StageTimeout = time.Minute }), "k", "evil/path?", "", good.addr)
	if err != nil || res.Peer != good.addr {
		t.Fatalf("got %+v, %v", res, err)
	}
}

// TestGetCanceled: the client goes away while the only peer hangs: Get
// returns context.Canceled at once, and the abandoned flight cancels its
// attempt.
func TestGetCanceled(t *testing.T) {
	entered, gone := make(chan struct{}), make(chan struct{})
	peer := startPeer(t, func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-r.Context().Done()
		close(gone)
	})
	p := newProxy(t, func(c *Config) { c.Timeout, c.StageTimeout = time.Minute, time.Minute })
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-entered
		cancel()
	}()
	_, err := p.Get(ctx, Request{DB: "db", Version: "v1", Key: []byte("k"), Peers: []string{peer.addr}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the abandoned attempt was not cancelled")
	}
}

func TestGetBodyLimit(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%v", chunked), func(t *testing.T) {
			body := strings.Repeat("x", 11)
			h := func(w http.ResponseWriter, r *http.Request) {
				key := strings.TrimPrefix(r.URL.Path, "/db/")
				n := len(body)
				if key == "fits" {
					n = 10
				}
				if !chunked {
					w.Header().Set("Content-Length", fmt.Sprint(n))
				}
				_, _ = w.Write([]byte(body[:n]))
				w.(http.Flusher).Flush()
			}
			peer := startPeer(t, h)
			p := newProxy(t, func(c *Config) { c.MaxBodyBytes = 10 })
			if _, err := get(p, "big", peer.addr); !errors.Is(err, ErrNoReplica) || !errors.Is(err, ErrBodyTooLarge) {
				t.Fatalf("err = %v, want ErrNoReplica wrapping ErrBodyTooLarge", err)
			}
			if res, err := get(p, "fits", peer.addr); err != nil || len(res.Body) != 10 {
				t.Fatalf("at the limit: %+v, %v", res, err)
			}
		})
	}
}

func TestGetVersionMismatch(t *testing.T) {
	var seq atomic.Int32
	h := func(w http.ResponseWriter, r *http.Request) {
		if seq.Add(1) == 1 {
			value("v0", "stale")(w, r)
			return
		}
		value("v1", "fresh")(w, r)
	}
	peers := []string{startPeer(t, h).addr, startPeer(t, h).addr}
	p := newProxy(t, func(c *Config) { c.StageTimeout = time.Minute })
	res, err := get(p, "k", peers...)
	if err != nil || string(res.Body) != "fresh" {
		t.Fatalf("got %+v, %v", res, err)
	}
	_, err = get(p, "k2", startPeer(t, value("v0", "stale")).addr)
	if !errors.Is(err, errVersion) {
		t.Fatalf("err = %v, want a version error", err)
	}
}

// TestKeyRoundTrip: any byte string reaches the peer's URL.Path intact,
// with ?proxy=<version> and &raw=1.
func TestKeyRoundTrip(t *testing.T) {
	peer := startPeer(t, func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, "/d-b_1/")
		if !ok {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.Header().Set(hdrVersion, r.URL.Query().Get("proxy"))
		fmt.Fprintf(w, "%s|%s", r.URL.Query().Get("raw"), rest)
	})
	p := newProxy(t, nil)
	keys := []string{
		"plain", "1881/boy", "/leading", "trailing/", "a//b", "%", "%2F", "%zz", "?x=1", "#frag", "a b+c",
		"\x00", "nul\x00in", "\xff\xfe invalid utf-8", "é🙂", ".", "..", "../../etc", "./a/../b", ";p=1", "&raw=0",
		strings.Repeat("k", 4096),
	}
	for _, version := range []string{"v1", "2026-03-01_a", "a+b c&d"} {
		for _, raw := range []bool{false, true} {
			for _, key := range keys {
				res, err := p.Get(context.Background(), Request{DB: "d-b_1", Version: version, Key: []byte(key), Peers: []string{peer.addr}, Raw: raw})
				want := map[bool]string{false: "", true: "1"}[raw] + "|" + key
				if err != nil || string(res.Body) != want || res.Version != version {
					t.Fatalf("key %q version %q raw %v: got %+v, %v; want body %q", key, version, raw, res, err, want)
				}
			}
		}
	}
}

// TestCoalesce: N identical concurrent lookups make one request; each
// caller gets its own body.
func TestCoalesce(t *testing.T) {
	const n = 8
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	peer := startPeer(t, func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(entered) })
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		value("v1", "shared")(w, r)
	})
	joined := make(chan struct{}, n)
	p := newProxy(t, func(c *Config) {
		c.Timeout, c.StageTimeout = time.Minute, time.Minute
		c.OnCoalesce = func() { joined <- struct{}{} }
	})

	results := make([]Response, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	wg.Go(func() { results[0], errs[0] = get(p, "k", peer.addr) })
	<-entered // the leader's attempt reached the peer
	for i := 1; i < n; i++ {
		wg.Go(func() { results[i], errs[i] = get(p, "k", peer.addr) })
	}
	for range n - 1 {
		<-joined
	}
	close(release)
	wg.Wait()

	if h := peer.hits.Load(); h != 1 {
		t.Fatalf("peer saw %d requests, want 1", h)
	}
	for i := range n {
		if errs[i] != nil || string(results[i].Body) != "shared" {
			t.Fatalf("caller %d: %+v, %v", i, results[i], errs[i])
		}
	}
	results[0].Body[0] = 'X'
	for i := 1; i < n; i++ {
		if string(results[i].Body) != "shared" {
			t.Fatalf("callers share a body: caller %d sees %q", i, results[i].Body)
		}
	}
}

// TestCoalesceCallerLeaves: the leader's caller going away does not fail
// the callers that joined it.
func TestCoalesceCallerLeaves(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	peer := startPeer(t, func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(entered) })
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		value("v1", "still here")(w, r)
	})
	joined := make(chan struct{}, 1)
	p := newProxy(t, func(c *Config) {
		c.Timeout, c.StageTimeout = time.Minute, time.Minute
		c.OnCoalesce = func() { joined <- struct{}{} }
	})
	ctx, cancel := context.WithCancel(context.Background())
	leaderErr := make(chan error, 1)
	go func() {
		_, err := p.Get(ctx, Request{DB: "db", Version: "v1", Key: []byte("k"), Peers: []string{peer.addr}})
		leaderErr <- err
	}()
	<-entered
	var res Response
	var err error
	done := make(chan struct{})
	go func() {
		res, err = get(p, "k", peer.addr)
		close(done)
	}()
	<-joined
	cancel()
	if e := <-leaderErr; !errors.Is(e, context.Canceled) {
		t.Fatalf("leader: %v, want context.Canceled", e)
	}
	close(release)
	<-done
	if err != nil || string(res.Body) != "still here" {
		t.Fatalf("joined caller: %+v, %v", res, err)
	}
}

// TestKeepAlive: sequential lookups to one peer reuse a connection.
func TestKeepAlive(t *testing.T) {
	peer := startPeer(t, value("v1", strings.Repeat("v", 1000)))
	p := newProxy(t, nil)
	for i := range 200 {
		if _, err := get(p, fmt.Sprint("key-", i), peer.addr); err != nil {
			t.Fatal(err)
		}
	}
	if c := peer.conn.Load(); c > 2 {
		t.Fatalf("%d connections for 200 sequential lookups, want ≤ 2", c)
	}
	t.Logf("200 lookups, %d connection(s)", peer.conn.Load())
}

func TestShuffle(t *testing.T) {
	peers := []string{startPeer(t, value("v1", "a")).addr, startPeer(t, value("v1", "b")).addr, startPeer(t, value("v1", "c")).addr}
	firsts := map[string]int{}
	p := newProxy(t, nil)
	for i := range 300 {
		res, err := get(p, fmt.Sprint(i), peers...)
		if err != nil {
			t.Fatal(err)
		}
		firsts[res.Peer]++
	}
	for _, addr := range peers {
		if n := firsts[addr]; n < 50 {
			t.Fatalf("peer %s answered first %d times of 300: %v", addr, n, firsts)
		}
	}

	// An injected source decides the order: two proxies seeded alike try
	// the peers in the same orders.
	bad := []string{startPeer(t, status(500)).addr, startPeer(t, status(500)).addr, startPeer(t, status(500)).addr}
	orders := func() []string {
		var at attempts
		p := newProxy(t, func(c *Config) { c.OnAttempt = at.record; c.Rand = rand.NewPCG(1, 2) })
		for i := range 10 {
			if _, err := get(p, fmt.Sprint(i), bad...); !errors.Is(err, ErrNoReplica) {
				t.Fatal(err)
			}
		}
		return at.list()
	}
	a, b := orders(), orders()
	if !slices.Equal(a, b) || len(a) != 30 {
		t.Fatalf("seeded orders differ:\n%v\n%v", a, b)
	}
	if slices.Equal(a[:3], a[3:6]) && slices.Equal(a[3:6], a[6:9]) && slices.Equal(a[6:9], a[9:12]) {
		t.Fatalf("the order never changes: %v", a)
	}
}

func TestShutdown(t *testing.T) {
	entered := make(chan struct{})
	var once sync.Once
	peer := startPeer(t, func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(entered) })
		<-r.Context().Done()
	})
	cfg := DefaultConfig()
	cfg.Timeout, cfg.StageTimeout = time.Minute, time.Minute
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := get(p, "k", peer.addr)
		errc <- err
	}()
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no patience: the flight is cancelled
	if err := p.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown = %v, want context.Canceled", err)
	}
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("Get during Shutdown = %v, want ErrClosed", err)
	}
	if _, err := get(p, "k", peer.addr); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Shutdown = %v, want ErrClosed", err)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatalf("second Shutdown = %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	tests := []struct {
		name string
		edit func(*Config)
	}{
		{"Timeout 0", func(c *Config) { c.Timeout = 0 }},
		{"StageTimeout 0", func(c *Config) { c.StageTimeout = 0 }},
		{"MaxBodyBytes 0", func(c *Config) { c.MaxBodyBytes = 0 }},
		{"MaxConnsPerPeer 0", func(c *Config) { c.MaxConnsPerPeer = 0 }},
		{"MaxBatchKeys 0", func(c *Config) { c.MaxBatchKeys = 0 }},
		{"MaxBatchBytes 0", func(c *Config) { c.MaxBatchBytes = 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.edit(&c)
			if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate = %v, want ErrInvalidConfig", err)
			}
			if _, err := New(c); err == nil {
				t.Fatal("New accepted it")
			}
		})
	}
}
