package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spangledb/spangle/node/batchwire"
)

// holdKey is the key kvPeers of these tests hold on to until released:
// asking it first occupies the only connection (MaxConnsPerPeer 1), so
// that the lookups after it queue.
const holdKey = "hold"

// batchSetup is a kvPeer whose holdKey lookups wait for release, and a
// Proxy with one connection per peer and no backup attempts.
type batchSetup struct {
	kv      *kvPeer
	peer    *testPeer
	p       *Proxy
	release chan struct{}
	held    chan error // the holdKey lookup's outcome
}

func newBatchSetup(t *testing.T, kv *kvPeer, edit func(*Config)) *batchSetup {
	t.Helper()
	s := &batchSetup{kv: kv, release: make(chan struct{}), held: make(chan error, 1)}
	if kv.keys == nil {
		kv.keys = make(chan int, 100)
	}
	before := kv.before
	kv.before = func(w http.ResponseWriter, r *http.Request, keys []string) bool {
		if slices.Contains(keys, holdKey) {
			select {
			case <-s.release:
			case <-r.Context().Done():
				return true
			}
		}
		return before != nil && before(w, r, keys)
	}
	s.peer = startPeer(t, kv.serve)
	t.Cleanup(func() {
		select {
		case <-s.release:
		default:
			close(s.release)
		}
	})
	s.p = newProxy(t, func(c *Config) {
		c.MaxConnsPerPeer = 1
		c.Timeout, c.StageTimeout = time.Minute, time.Minute
		if edit != nil {
			edit(c)
		}
	})
	return s
}

// hold sends the holdKey lookup and waits until the peer has it.
func (s *batchSetup) hold(t *testing.T) {
	t.Helper()
	go func() {
		_, err := get(s.p, holdKey, s.peer.addr)
		s.held <- err
	}()
	if n := <-s.kv.keys; n != 1 {
		t.Fatalf("the hold request has %d keys", n)
	}
}

// queue starts lookups of keys (each as get does, but with ctx) and waits
// until they all wait in the peer's queue; their results come on the
// returned channels, in order.
func (s *batchSetup) queue(t *testing.T, ctx context.Context, keys ...string) []chan lookupResult {
	t.Helper()
	before := queued(s.p, s.peer.addr)
	out := make([]chan lookupResult, len(keys))
	for i, k := range keys {
		out[i] = make(chan lookupResult, 1)
		go func() {
			res, err := s.p.Get(ctx, Request{DB: "db", Version: "v1", Key: []byte(k), Peers: []string{s.peer.addr}})
			out[i] <- lookupResult{res, err}
		}()
	}
	checkFor(t, 10*time.Second, "lookups queued", func() bool { return queued(s.p, s.peer.addr) == before+len(keys) })
	return out
}

// unhold releases the holdKey lookup and checks it was answered.
func (s *batchSetup) unhold(t *testing.T) {
	t.Helper()
	close(s.release)
	if err := <-s.held; err != nil {
		t.Fatalf("hold lookup: %v", err)
	}
}

type lookupResult struct {
	res Response
	err error
}

// TestBatch: lookups that queue behind a busy connection go together in
// one batch request, and each gets its own answer: values, 404s, the
// peer and the version.
func TestBatch(t *testing.T) {
	data := map[string]string{holdKey: "h", "a": "alpha", "b": "", "c/d": "gamma", "\x00\xff": "bin"}
	s := newBatchSetup(t, &kvPeer{v: "v1", data: data}, nil)
	s.hold(t)
	keys := []string{"a", "missing", "b", "c/d", "\x00\xff"}
	results := s.queue(t, context.Background(), keys...)
	s.unhold(t)
	if n := <-s.kv.keys; n != len(keys) {
		t.Fatalf("batch of %d keys, want %d", n, len(keys))
	}
	for i, k := range keys {
		r := <-results[i]
		want, found := data[k]
		status := map[bool]int{true: 200, false: 404}[found]
		if r.err != nil || r.res.Status != status || string(r.res.Body) != want || r.res.Version != "v1" || r.res.Peer != s.peer.addr {
			t.Errorf("key %q: %+v, %v; want %d %q", k, r.res, r.err, status, want)
		}
	}
	if h := s.peer.hits.Load(); h != 2 {
		t.Fatalf("%d requests, want 2", h)
	}
}

// TestBatchLimits: a batch carries at most MaxBatchKeys keys and
// MaxBatchBytes of them; the rest wait for the next request.
func TestBatchLimits(t *testing.T) {
	data := map[string]string{holdKey: "h"}
	var keys []string
	for i := range 7 {
		k := fmt.Sprintf("key-%05d", i) // 9 bytes
		data[k] = k
		keys = append(keys, k)
	}
	for _, tt := range []struct {
		name string
		edit func(*Config)
		want []int
	}{
		{"keys", func(c *Config) { c.MaxBatchKeys = 3 }, []int{3, 3, 1}},
		{"bytes", func(c *Config) { c.MaxBatchBytes = 20 }, []int{2, 2, 2, 1}},
		{"off", func(c *Config) { c.MaxBatchKeys = 1 }, []int{1, 1, 1, 1, 1, 1, 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newBatchSetup(t, &kvPeer{v: "v1", data: data}, tt.edit)
			s.hold(t)
			results := s.queue(t, context.Background(), keys...)
			s.unhold(t)
			var got []int
			for range tt.want {
				got = append(got, <-s.kv.keys)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("requests of %v keys, want %v", got, tt.want)
			}
			for i, k := range keys {
				if r := <-results[i]; r.err != nil || string(r.res.Body) != k {
					t.Errorf("key %q: %+v, %v", k, r.res, r.err)
				}
			}
		})
	}
	// A key larger than MaxBatchBytes goes alone.
	s := newBatchSetup(t, &kvPeer{v: "v1", data: data}, func(c *Config) { c.MaxBatchBytes = 5 })
	s.hold(t)
	results := s.queue(t, context.Background(), keys[:2]...)
	s.unhold(t)
	if a, b := <-s.kv.keys, <-s.kv.keys; a != 1 || b != 1 {
		t.Fatalf("requests of %d and %d keys, want 1 and 1", a, b)
	}
	for i := range 2 {
		if r := <-results[i]; r.err != nil {
			t.Fatal(r.err)
		}
	}
}

// TestBatchGroups: lookups of different dbs, versions or raw never share
// a request.
func TestBatchGroups(t *testing.T) {
	var mu sync.Mutex
	var seen []string // "<path>?<query> <keys>"
	kv := &kvPeer{v: "*", data: map[string]string{holdKey: "h", "k": "v"}}
	kv.before = func(w http.ResponseWriter, r *http.Request, keys []string) bool {
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s %s?%s %d", r.Method, r.URL.Path, r.URL.RawQuery, len(keys)))
		mu.Unlock()
		return false
	}
	s := newBatchSetup(t, kv, nil)
	s.hold(t)
	reqs := []Request{
		{DB: "db", Version: "v1", Key: []byte("k")},
		{DB: "db", Version: "v2", Key: []byte("k")},
		{DB: "db", Version: "v1", Key: []byte("k"), Raw: true},
		{DB: "db2", Version: "v1", Key: []byte("k")},
		{DB: "db", Version: "v1", Key: []byte("k2")},
		{DB: "db", Version: "v2", Key: []byte("k2")},
	}
	var wg sync.WaitGroup
	for _, r := range reqs {
		r.Peers = []string{s.peer.addr}
		wg.Go(func() {
			res, err := s.p.Get(context.Background(), r)
			if err != nil || res.Version != r.Version {
				t.Errorf("%+v: %+v, %v", r, res, err)
			}
		})
	}
	checkFor(t, 10*time.Second, "lookups queued", func() bool { return queued(s.p, s.peer.addr) == len(reqs) })
	s.unhold(t)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(seen)
	want := []string{
		"GET /db/hold?proxy=v1 1",
		"GET /db/k?proxy=v1&raw=1 1",
		"GET /db2/k?proxy=v1 1",
		"POST /db/_batch?proxy=v1 2",
		"POST /db/_batch?proxy=v2 2",
	}
	if !slices.Equal(seen, want) {
		t.Fatalf("requests:\n%s\nwant:\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
}

// TestBatchRefused: a batch the peer refuses as a whole (its status
// says a key may still succeed alone, or the reply does not parse) is
// asked again key by key, on the same peer.
func TestBatchRefused(t *testing.T) {
	data := map[string]string{holdKey: "h", "a": "alpha", "b": "beta"}
	for _, tt := range []struct {
		name   string
		answer func(w http.ResponseWriter)
	}{
		{"500", func(w http.ResponseWriter) { http.Error(w, "partition not held here", 500) }},
		{"405", func(w http.ResponseWriter) { w.WriteHeader(405) }},
		{"400", func(w http.ResponseWriter) { w.WriteHeader(400) }},
		{"413", func(w http.ResponseWriter) { w.WriteHeader(413) }},
		{"malformed", func(w http.ResponseWriter) { _, _ = w.Write([]byte("SBR\x01\x02v1\x00\x05")) }},
		{"not a reply", func(w http.ResponseWriter) { _, _ = w.Write([]byte("alpha")) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			kv := &kvPeer{v: "v1", data: data}
			kv.before = func(w http.ResponseWriter, r *http.Request, keys []string) bool {
				if r.Method == http.MethodPost {
					tt.answer(w)
					return true
				}
				return false
			}
			s := newBatchSetup(t, kv, nil)
			s.hold(t)
			results := s.queue(t, context.Background(), "a", "missing", "b")
			s.unhold(t)
			for i, k := range []string{"a", "missing", "b"} {
				r := <-results[i]
				if want, ok := data[k]; r.err != nil || string(r.res.Body) != want || (r.res.Status == 200) != ok {
					t.Errorf("key %q: %+v, %v", k, r.res, r.err)
				}
			}
			var got []int
			for range 4 {
				got = append(got, <-s.kv.keys)
			}
			if !slices.Equal(got, []int{3, 1, 1, 1}) {
				t.Fatalf("requests of %v keys, want a batch of 3, then one by one", got)
			}
		})
	}
}

// TestBatchFailures: a batch that fails as a whole fails each of its
// lookups' attempts (which then try the next peer); an item that fails
// fails its lookup's attempt only.
func TestBatchFailures(t *testing.T) {
	good := startPeer(t, (&kvPeer{v: "v1", data: map[string]string{"a": "good a", "b": "good b"}}).serve)
	// items answers keys "a" with a and "b" with "B", in the keys' order.
	items := func(a string) func(keys []string) string {
		return func(keys []string) string {
			var b strings.Builder
			for _, k := range keys {
				if k == "a" {
					b.WriteString(a)
				} else {
					b.WriteString("\x01\x01B")
				}
			}
			return b.String()
		}
	}
	for _, tt := range []struct {
		name    string
		status  int
		version string
		items   func(keys []string) string
		wantErr error    // of the lookups from the bad peer
		fromBad []string // keys the bad peer answers
	}{
		{"503", 503, "v1", items("\x01\x01A"), errStatus, nil},
		{"version", 200, "v0", items("\x01\x01A"), errVersion, nil},
		{"item failed", 200, "v1", items("\x02\x04oops"), errItem, []string{"b"}},
		{"item too large", 200, "v1", items("\x01\x0bABCDEFGHIJK"), ErrBodyTooLarge, []string{"b"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			kv := &kvPeer{v: "v1", data: map[string]string{holdKey: "h"}}
			kv.before = func(w http.ResponseWriter, r *http.Request, keys []string) bool {
				if r.Method != http.MethodPost {
					return false
				}
				w.WriteHeader(tt.status)
				fmt.Fprintf(w, "SBR\x01\x02%s\x00\x02%s", tt.version, tt.items(keys))
				return true
			}
			s := newBatchSetup(t, kv, func(c *Config) { c.MaxBodyBytes = 10 })
			s.hold(t)
			results := make([]chan lookupResult, 2)
			for i, k := range []string{"a", "b"} {
				results[i] = make(chan lookupResult, 1)
				go func() {
					res, err := s.p.Get(context.Background(), Request{DB: "db", Version: "v1", Key: []byte(k), Peers: []string{s.peer.addr}})
					if err == nil {
						results[i] <- lookupResult{res, err}
						return
					}
					if !errors.Is(err, tt.wantErr) {
						t.Errorf("key %s: %v, want %v", k, err, tt.wantErr)
					}
					// Then from a good peer.
					res, err = s.p.Get(context.Background(), Request{DB: "db", Version: "v1", Key: []byte(k), Peers: []string{good.addr}})
					results[i] <- lookupResult{res, err}
				}()
			}
			checkFor(t, 10*time.Second, "lookups queued", func() bool { return queued(s.p, s.peer.addr) == 2 })
			s.unhold(t)
			for i, k := range []string{"a", "b"} {
				r := <-results[i]
				want := "good " + k
				if slices.Contains(tt.fromBad, k) {
					want = strings.ToUpper(k)
				}
				if r.err != nil || string(r.res.Body) != want {
					t.Errorf("key %s: %+v, %v; want %q", k, r.res, r.err, want)
				}
			}
		})
	}
}

// TestBatchCallerLeaves: a lookup whose caller leaves while it queues is
// not sent; a batch whose callers all leave is cancelled (its connection
// closed), and one whose callers partly leave is answered for the
// others.
func TestBatchCallerLeaves(t *testing.T) {
	data := map[string]string{holdKey: "h", "a": "alpha", "b": "beta", "c": "gamma"}

	t.Run("queued", func(t *testing.T) {
		s := newBatchSetup(t, &kvPeer{v: "v1", data: data}, nil)
		s.hold(t)
		ctx, cancel := context.WithCancel(context.Background())
		gone := s.queue(t, ctx, "a")
		stay := s.queue(t, context.Background(), "b", "c")
		cancel()
		if r := <-gone[0]; !errors.Is(r.err, context.Canceled) {
			t.Fatalf("left: %v", r.err)
		}
		s.unhold(t)
		if n := <-s.kv.keys; n != 2 {
			t.Fatalf("batch of %d keys, want 2", n)
		}
		for i, k := range []string{"b", "c"} {
			if r := <-stay[i]; r.err != nil || string(r.res.Body) != data[k] {
				t.Fatalf("%s: %+v, %v", k, r.res, r.err)
			}
		}
	})

	t.Run("sent", func(t *testing.T) {
		entered, cancelled := make(chan struct{}), make(chan struct{})
		free := make(chan struct{})
		kv := &kvPeer{v: "v1", data: data}
		kv.before = func(w http.ResponseWriter, r *http.Request, keys []string) bool {
			if len(keys) < 2 {
				return false
			}
			entered <- struct{}{}
			select {
			case <-free:
				return false
			case <-r.Context().Done():
				close(cancelled)
				return true
			}
		}
		s := newBatchSetup(t, kv, nil)
		s.hold(t)
		ctx1, cancel1 := context.WithCancel(context.Background())
		ctx2, cancel2 := context.WithCancel(context.Background())
		r1 := s.queue(t, ctx1, "a", "b")
		r2 := s.queue(t, ctx2, "c")
		s.unhold(t)
		<-entered // the batch of three is at the peer
		cancel1() // two of three leave: the batch goes on
		for _, r := range r1 {
			if res := <-r; !errors.Is(res.err, context.Canceled) {
				t.Fatalf("left: %v", res.err)
			}
		}
		select {
		case <-cancelled:
			t.Fatal("the batch was cancelled while a caller waited")
		default:
		}
		cancel2() // the last one leaves: the batch is cancelled
		if res := <-r2[0]; !errors.Is(res.err, context.Canceled) {
			t.Fatalf("left: %v", res.err)
		}
		select {
		case <-cancelled:
		case <-time.After(10 * time.Second):
			t.Fatal("the abandoned batch was not cancelled")
		}
		close(free)
	})
}

// TestBatchWire: the worked example of edge/BATCH.md.
func TestBatchWire(t *testing.T) {
	var attempts []*attempt
	for _, k := range []string{"a", "", "\x00\xff"} {
		attempts = append(attempts, &attempt{f: &flight{req: Request{Key: []byte(k)}}})
	}
	wantReq := []byte{0x53, 0x42, 0x51, 0x01, 0x03, 0x01, 0x61, 0x00, 0x02, 0x00, 0xff}
	if got := appendBatchRequest(nil, attempts); !bytes.Equal(got, wantReq) {
		t.Fatalf("request % x, want % x", got, wantReq)
	}
	reply := []byte{0x53, 0x42, 0x52, 0x01, 0x02, 0x76, 0x32, 0x00, 0x03, 0x01, 0x02, 0x68, 0x69, 0x00, 0x01, 0x00}
	items, err := decodeBatchReply(nil, reply, 3, "peer:1", "v2", 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []Response{
		{Status: 200, Body: []byte("hi"), Version: "v2", Peer: "peer:1"},
		{Status: 404, Version: "v2", Peer: "peer:1"},
		{Status: 200, Body: nil, Version: "v2", Peer: "peer:1"},
	}
	for i, it := range items {
		if it.err != nil || it.res.Status != want[i].Status || !bytes.Equal(it.res.Body, want[i].Body) ||
			it.res.Version != want[i].Version || it.res.Peer != want[i].Peer {
			t.Errorf("item %d: %+v, %v; want %+v", i, it.res, it.err, want[i])
		}
	}
	// Values do not alias the reply.
	items[0].res.Body[0] = 'X'
	if reply[11] != 0x68 {
		t.Fatal("a value aliases the reply")
	}
	for _, bad := range []struct {
		n       int
		version string
		err     error
	}{{2, "v2", errMalformed}, {4, "v2", errMalformed}, {3, "v1", errVersion}} {
		if _, err := decodeBatchReply(nil, reply, bad.n, "peer:1", bad.version, 10); !errors.Is(err, bad.err) {
			t.Errorf("%d keys of %s: %v, want %v", bad.n, bad.version, err, bad.err)
		}
	}
	for i := range len(reply) {
		if _, err := decodeBatchReply(nil, reply[:i], 3, "peer:1", "v2", 10); err == nil {
			t.Errorf("the reply cut to %d bytes decoded", i)
		}
	}
}

// FuzzDecodeBatchReply: any bytes decode to n items or fail cleanly.
func FuzzDecodeBatchReply(f *testing.F) {
	f.Add([]byte{0x53, 0x42, 0x52, 0x01, 0x02, 0x76, 0x32, 0x00, 0x03, 0x01, 0x02, 0x68, 0x69, 0x00, 0x01, 0x00}, 3)
	f.Add([]byte("SBR\x01\x02v2\x00\x01\x02\x04oops"), 1)
	f.Add([]byte("SBR\x01\x02v2\x00\x01\x03"), 1)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		if n < 0 || n > 1000 {
			return
		}
		items, err := decodeBatchReply(nil, b, n, "p:1", "v2", 8)
		if err != nil {
			if !errors.Is(err, errMalformed) && !errors.Is(err, errVersion) {
				t.Fatalf("error %v is neither malformed nor version", err)
			}
			return
		}
		if len(items) != n {
			t.Fatalf("%d items for %d keys", len(items), n)
		}
		for _, it := range items {
			if it.err == nil && (len(it.res.Body) > 8 || it.res.Version != "v2") {
				t.Fatalf("item %+v", it.res)
			}
		}
	})
}

// TestBatchSecondConnection: while a request to a peer is in flight,
// lookups wait for it; another request starts alongside, up to
// MaxConnsPerPeer, only once a full batch waits.
func TestBatchSecondConnection(t *testing.T) {
	data := map[string]string{holdKey: "h", "a": "alpha", "b": "beta", "c": "gamma"}
	s := newBatchSetup(t, &kvPeer{v: "v1", data: data}, func(c *Config) { c.MaxConnsPerPeer, c.MaxBatchKeys = 2, 3 })
	s.hold(t)
	results := s.queue(t, context.Background(), "a", "b") // not a full batch: they wait
	if h := s.peer.hits.Load(); h != 1 {
		t.Fatalf("%d requests with two lookups queued, want 1", h)
	}
	results = append(results, make(chan lookupResult, 1))
	go func() {
		res, err := get(s.p, "c", s.peer.addr)
		results[2] <- lookupResult{res, err}
	}()
	if n := <-s.kv.keys; n != 3 { // sent while the first request still hangs
		t.Fatalf("second request of %d keys, want 3", n)
	}
	for i, k := range []string{"a", "b", "c"} {
		if r := <-results[i]; r.err != nil || string(r.res.Body) != data[k] {
			t.Fatalf("%s: %+v, %v", k, r.res, r.err)
		}
	}
	s.unhold(t)
}

// TestBatchShutdown: Shutdown out of patience ends lookups queued and in
// flight with ErrClosed, and waits for its senders.
func TestBatchShutdown(t *testing.T) {
	s := newBatchSetup(t, &kvPeer{v: "v1", data: map[string]string{holdKey: "h", "a": "alpha"}}, nil)
	s.hold(t)
	results := s.queue(t, context.Background(), "a", "b")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.p.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown = %v, want context.Canceled", err)
	}
	if err := <-s.held; !errors.Is(err, ErrClosed) {
		t.Fatalf("hold lookup: %v, want ErrClosed", err)
	}
	for i, r := range results {
		if res := <-r; !errors.Is(res.err, ErrClosed) {
			t.Fatalf("queued lookup %d: %v, want ErrClosed", i, res.err)
		}
	}
	s.p.peersMu.Lock()
	defer s.p.peersMu.Unlock()
	if n := len(s.p.peers); n != 0 {
		t.Fatalf("%d peers with senders after Shutdown", n)
	}
}

// BenchmarkBatchCodec measures a front's per-batch wire work: encoding
// the request for n attempts and decoding the reply of n 100-byte values
// into pooled items, as a sender does; ns/key is per key.
func BenchmarkBatchCodec(b *testing.B) {
	val := bytes.Repeat([]byte("v"), 100)
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			attempts := make([]*attempt, n)
			for i := range attempts {
				attempts[i] = &attempt{f: &flight{req: Request{Key: fmt.Appendf(nil, "%016d", i)}}}
			}
			reply := batchwire.AppendReplyHeader(nil, "v2", "", n)
			for range n {
				reply = batchwire.AppendItem(reply, batchwire.Found, val)
			}
			var req []byte
			b.ReportAllocs()
			for b.Loop() {
				req = appendBatchRequest(req[:0], attempts)
				ip := batchItemBufs.Get().(*[]batchItem)
				items, err := decodeBatchReply((*ip)[:0], reply, n, "p:1", "v2", 1<<20)
				if err != nil {
					b.Fatal(err)
				}
				putBatchItems(ip, items)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/key")
		})
	}
}
