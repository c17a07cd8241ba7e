package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/proxy"
)

// mapBackend is a fake of edge's Backend and BatchBackend (our own small
// interfaces) over one version of one db: it answers pinned lookups the
// way a spangle node does. Keys in notHeld are in a partition it does
// not hold; gate, if set, runs before each key's lookup and may block.
type mapBackend struct {
	version string
	data    map[string]string
	notHeld map[string]bool
	gate    func(key string)

	mu      sync.Mutex
	batches []int // keys of each GetMany
}

func (b *mapBackend) Get(ctx context.Context, db string, key []byte, opts node.GetOptions) (node.Result, error) {
	if opts.Version != b.version {
		return node.Result{}, node.ErrUnknownVersion
	}
	if b.gate != nil {
		b.gate(string(key))
	}
	if b.notHeld[string(key)] {
		return node.Result{}, fmt.Errorf("%w: key %q", node.ErrPartitionNotHeld, key)
	}
	v, ok := b.data[string(key)]
	return node.Result{Value: []byte(v), Found: ok, Version: b.version}, nil
}

func (b *mapBackend) GetMany(ctx context.Context, db string, keys [][]byte, opts node.GetOptions) (string, []node.Result, error) {
	b.mu.Lock()
	b.batches = append(b.batches, len(keys))
	b.mu.Unlock()
	results := make([]node.Result, len(keys))
	for i, k := range keys {
		res, err := b.Get(ctx, db, k, opts)
		if err != nil {
			return "", nil, err
		}
		results[i] = res
	}
	return b.version, results, nil
}

func (b *mapBackend) Status() node.Status { return node.Status{} }
func (b *mapBackend) Ready() bool         { return true }

func (b *mapBackend) maxBatch() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := 0
	for _, n := range b.batches {
		m = max(m, n)
	}
	return m
}

// TestEdgePeerBatches: lookups that queue for a real edge peer go to it
// in batches, and each gets its own answer; a batch with one key the peer
// does not hold is asked again key by key, so that only that key fails.
func TestEdgePeerBatches(t *testing.T) {
	const n = 20
	release := make(chan struct{})
	data := map[string]string{"hold": "h"}
	for i := range n {
		data[fmt.Sprint("key/", i)] = fmt.Sprint("value ", i)
	}
	b := &mapBackend{version: "v1", data: data, notHeld: map[string]bool{"key/7": true},
		gate: func(key string) {
			if key == "hold" {
				<-release
			}
		}}
	peer := startEdge(t, b)
	var launched atomic.Int32
	cfg := proxy.DefaultConfig()
	cfg.MaxConnsPerPeer = 1
	cfg.Timeout, cfg.StageTimeout = time.Minute, time.Minute
	cfg.OnAttempt = func(string) { launched.Add(1) }
	p, err := proxy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	get := func(key string) (proxy.Response, error) {
		return p.Get(context.Background(), proxy.Request{DB: "db", Version: "v1", Key: []byte(key), Peers: []string{peer}, Raw: true})
	}

	held := make(chan error, 1)
	go func() {
		_, err := get("hold")
		held <- err
	}()
	var wg sync.WaitGroup
	errs := make([]error, n+1)
	for i := range n + 1 { // key/n is missing
		wg.Go(func() {
			k := fmt.Sprint("key/", i)
			res, err := get(k)
			switch {
			case i == 7:
				if !errors.Is(err, proxy.ErrNoReplica) {
					err = fmt.Errorf("key/7 (not held): %+v, %v; want ErrNoReplica", res, err)
				} else {
					err = nil
				}
			case i == n:
				if err == nil && res.Status != 404 {
					err = fmt.Errorf("key/%d (missing): %+v", i, res)
				}
			case err == nil && (res.Status != 200 || string(res.Body) != data[k] || res.Version != "v1" || res.Peer != peer):
				err = fmt.Errorf("%s: %+v", k, res)
			}
			errs[i] = err
		})
	}
	// Every lookup has started its attempt (it queues behind "hold").
	for deadline := time.Now().Add(10 * time.Second); launched.Load() < n+2; {
		if time.Now().After(deadline) {
			t.Fatalf("%d attempts started, want %d", launched.Load(), n+2)
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if m := b.maxBatch(); m < 2 {
		t.Fatalf("largest batch %d keys, want several", m)
	}
}

// frontBackend is the node a client talks to, as edge sees it: keys of
// db "local" are in its map, those of db "proxied" are on peer, reached
// through p.
type frontBackend struct {
	local *mapBackend
	p     *proxy.Proxy
	peer  []string
}

func (f *frontBackend) Get(ctx context.Context, db string, key []byte, opts node.GetOptions) (node.Result, error) {
	if db == "local" {
		return f.local.Get(ctx, db, key, node.GetOptions{Version: f.local.version})
	}
	res, err := f.p.Get(ctx, proxy.Request{DB: "db", Version: "v1", Key: key, Peers: f.peer, Raw: true})
	if err != nil {
		return node.Result{}, fmt.Errorf("%w: %w", node.ErrNoReplica, err)
	}
	return node.Result{Value: res.Body, Found: res.Status == 200, Version: "v1", ProxiedTo: res.Peer}, nil
}

func (f *frontBackend) Status() node.Status { return node.Status{} }
func (f *frontBackend) Ready() bool         { return true }

// BenchmarkFrontDoor is the cluster scenario of spangle-bench in one
// process: HTTP clients GET random keys of 100-byte values from a front
// edge.Server, which holds the keys of db "local" and proxies those of
// db "proxied" to a peer edge.Server, both on loopback. Both loads run
// in the same run, at parallelism × GOMAXPROCS concurrent clients; the
// proxied load reports local-ratio, local ns/op over its own: the
// throughput ratio spangle-bench reports. The clients' cost is in both.
func BenchmarkFrontDoor(b *testing.B) {
	const keys = 100_000
	data := make(map[string]string, keys)
	for i := range keys {
		data[fmt.Sprintf("%016d", i)] = strings.Repeat("v", 100)
	}
	peer := &mapBackend{version: "v1", data: data}
	peerAddr := startEdge(b, peer)
	cfg := proxy.DefaultConfig()
	// The subject is cost: a loaded machine's stalls must not fail lookups.
	cfg.Timeout, cfg.StageTimeout = time.Minute, time.Minute
	p, err := proxy.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	front := startEdge(b, &frontBackend{local: &mapBackend{version: "v1", data: data}, p: p, peer: []string{peerAddr}})

	for _, par := range []int{1, 25} {
		var perOp [2]time.Duration
		for i, db := range []string{"local", "proxied"} {
			b.Run(fmt.Sprintf("%s/par=%d", db, par), func(b *testing.B) {
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1000, DisableCompression: true}}
				defer client.CloseIdleConnections()
				prefix := "http://" + front + "/" + db + "/"
				var n atomic.Uint64
				b.ReportAllocs()
				b.SetParallelism(par)
				b.RunParallel(func(pb *testing.PB) {
					rnd := rand.New(rand.NewPCG(n.Add(1), 7))
					for pb.Next() {
						resp, err := client.Get(prefix + fmt.Sprintf("%016d", rnd.IntN(keys)))
						if err != nil {
							b.Error(err)
							return
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusOK {
							b.Errorf("status %d", resp.StatusCode)
							return
						}
					}
				})
				perOp[i] = b.Elapsed() / time.Duration(b.N)
				if i == 1 && perOp[0] > 0 {
					// spangle-bench's proxied/local throughput ratio.
					b.ReportMetric(float64(perOp[0])/float64(perOp[1]), "local-ratio")
				}
			})
		}
	}
}

// startEdge serves be with a real edge.Server on loopback and returns
// its "host:port".
func startEdge(tb testing.TB, be edge.Backend, edits ...func(*edge.Config)) string {
	tb.Helper()
	cfg := edge.DefaultConfig()
	cfg.Backend = be
	if bb, ok := be.(edge.BatchBackend); ok {
		cfg.Batch = bb // as spangle.Start gives the node
	}
	for _, e := range edits {
		e(&cfg)
	}
	srv, err := edge.NewServer(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	tb.Cleanup(hs.Close)
	return strings.TrimPrefix(hs.URL, "http://")
}

// TestPeerToken: a peer that requires the cluster's token answers a
// proxy that sends it, single lookups and batches alike, and refuses one
// that does not (403, so no replica answered) and a plain client asking
// with ?proxy=.
func TestPeerToken(t *testing.T) {
	b := &mapBackend{version: "v1", data: map[string]string{"a": "A", "b": "B"}}
	peer := startEdge(t, b, func(c *edge.Config) { c.PeerToken = "s3cret" })
	for _, token := range []string{"s3cret", "wrong", ""} {
		cfg := proxy.DefaultConfig()
		cfg.PeerToken = token
		cfg.Timeout, cfg.StageTimeout = 5*time.Second, 5*time.Second
		p, err := proxy.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for _, k := range []string{"a", "b", "a", "b"} { // concurrent: some travel in one batch
			wg.Go(func() {
				res, err := p.Get(context.Background(), proxy.Request{DB: "db", Version: "v1", Key: []byte(k), Peers: []string{peer}, Raw: true})
				switch {
				case token == "s3cret" && (err != nil || res.Status != 200):
					t.Errorf("with the token, %s: %+v %v", k, res, err)
				case token != "s3cret" && !errors.Is(err, proxy.ErrNoReplica):
					t.Errorf("token %q, %s: %+v %v; want ErrNoReplica", token, k, res, err)
				}
			})
		}
		wg.Wait()
		_ = p.Shutdown(context.Background())
	}
	resp, err := http.Get("http://" + peer + "/db/a?proxy=v1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a client with ?proxy=: %d, want 403", resp.StatusCode)
	}
}
