package edge_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/node"
	bare "github.com/spangledb/spangle/node/nodetest"
)

// fakeBackend is a hand-written edge.Backend: dbs of string values, an
// optional error per db, and hooks for the odd case.
type fakeBackend struct {
	mu     sync.Mutex
	dbs    map[string]fakeDB
	status node.Status
	calls  []fakeCall // every Get, in order

	ready atomic.Bool
	// get, when set, answers instead of dbs.
	get func(ctx context.Context, db string, key []byte, opts node.GetOptions) (node.Result, error)
}

type fakeDB struct {
	result node.Result       // Version, Modified, ContentType, CacheControl, ProxiedTo
	values map[string]string // nil: every key holds "value of <key>"
	err    error             // returned for every key
}

type fakeCall struct {
	db   string
	key  string
	opts node.GetOptions
}

func (f *fakeBackend) Get(ctx context.Context, db string, key []byte, opts node.GetOptions) (node.Result, error) {
	f.mu.Lock()
	f.calls = append(f.calls, fakeCall{db: db, key: string(key), opts: opts})
	d, ok := f.dbs[db]
	get := f.get
	f.mu.Unlock()
	if get != nil {
		return get(ctx, db, key, opts)
	}
	if !ok {
		return node.Result{}, node.ErrUnknownDB
	}
	if d.err != nil {
		return node.Result{}, d.err
	}
	if opts.Version != "" && opts.Version != d.result.Version {
		return node.Result{}, node.ErrUnknownVersion
	}
	res := d.result
	if d.values == nil {
		res.Value, res.Found = []byte("value of "+string(key)), true
	} else if v, ok := d.values[string(key)]; ok {
		res.Value, res.Found = []byte(v), true
	}
	return res, nil
}

func (f *fakeBackend) Status() node.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status
}

func (f *fakeBackend) Ready() bool { return f.ready.Load() }

func (f *fakeBackend) lastCall(t testing.TB) fakeCall {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) == 0 {
		t.Fatal("backend was not called")
	}
	return f.calls[len(f.calls)-1]
}

func (f *fakeBackend) numCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

var testModified = time.Date(2026, 3, 1, 12, 30, 0, 0, time.UTC)

// newFake returns a backend with db "baby-names" (version "1", every key
// present) and db "names" (version "v2", only key "alice").
func newFake() *fakeBackend {
	f := &fakeBackend{dbs: map[string]fakeDB{
		"baby-names": {result: node.Result{Version: "1", Modified: testModified}},
		"names": {
			result: node.Result{Version: "v2", Modified: testModified, ContentType: "text/plain; charset=utf-8",
				CacheControl: "max-age=60"},
			values: map[string]string{"alice": "Alice Liddell"},
		},
	}}
	f.ready.Store(true)
	return f
}

// testServer is an edge.Server serving on a loopback listener.
type testServer struct {
	*edge.Server
	url      string // http://127.0.0.1:port
	addr     string
	registry *prometheus.Registry
	client   *http.Client
}

// startServer starts an edge.Server on loopback for backend b, with cfg
// changed by each opt, and shuts it down on cleanup.
func startServer(t testing.TB, b edge.Backend, opts ...func(*edge.Config)) *testServer {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg := edge.DefaultConfig()
	cfg.Backend = b
	if bb, ok := b.(edge.BatchBackend); ok {
		cfg.Batch = bb // as spangle.Start gives the node
	}
	if lb, ok := b.(edge.ListBackend); ok {
		cfg.List = lb
	}
	cfg.Registerer = reg
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := edge.NewServer(cfg)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	transport := &http.Transport{}
	t.Cleanup(func() {
		transport.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &testServer{
		Server:   srv,
		url:      "http://" + l.Addr().String(),
		addr:     l.Addr().String(),
		registry: reg,
		client:   &http.Client{Transport: transport, Timeout: 10 * time.Second},
	}
}

// response is a fully read HTTP response.
type response struct {
	status int
	header http.Header
	body   string
	length int64 // Content-Length as the client saw it
}

// do sends method rawPath (an escaped path with an optional query) with
// headers given as name, value pairs, and reads the whole answer.
func (ts *testServer) do(t testing.TB, method, rawPath string, headers ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, ts.url+rawPath, nil)
	if err != nil {
		t.Fatalf("NewRequest %s: %v", rawPath, err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	resp, err := ts.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rawPath, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, rawPath, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: string(body), length: resp.ContentLength}
}

func withNodeName(name string) func(*edge.Config) {
	return func(c *edge.Config) { c.NodeName = name }
}

// checkFor polls cond until it holds or d passes.
func checkFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	bare.WaitFor(t, d, what, bare.True(cond))
}
