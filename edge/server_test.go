package edge_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	bare "github.com/spangledb/spangle/node/nodetest"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/node"
)

// counterValue returns spangle_http_requests_total{db,code} from reg.
func counterValue(t testing.TB, reg prometheus.Gatherer, db, code string) float64 {
	t.Helper()
	return counterOf(t, reg, "spangle_http_requests_total", "db", db, "code", code)
}

// counterOf returns the counter or gauge name{labels…} from reg (label
// names and values alternate), 0 if absent.
func counterOf(t testing.TB, reg prometheus.Gatherer, name string, kv ...string) float64 {
	t.Helper()
	return bare.Metric(t, reg, name, kv...)
}

func TestMetrics(t *testing.T) {
	b := newFake()
	b.dbs["down"] = fakeDB{err: node.ErrNoReplica}
	ts := startServer(t, b)
	for range 3 {
		ts.do(t, "GET", "/baby-names/1881")
	}
	ts.do(t, "GET", "/names/bob")
	ts.do(t, "GET", "/down/k")
	for i := range 20 {
		ts.do(t, "GET", fmt.Sprintf("/unknown-%d/k", i))
	}
	ts.do(t, "GET", "/")
	ts.do(t, "GET", "/healthz")
	// Answers before the lookup count too (issue 29: they did not).
	if r := ts.do(t, "GET", "/baby-names/1881?nosuch=1"); r.status != 400 {
		t.Errorf("unknown parameter: %d, want 400", r.status)
	}
	ts.do(t, "GET", "/baby-names/%31881") // 301, then the client's GET of the canonical path: 200
	ts.do(t, "GET", "//x")

	tests := []struct {
		db, code string
		want     float64
	}{
		{"baby-names", "200", 4},
		{"names", "404", 1},
		{"names", "200", 0},
		{"down", "502", 1},
		{"", "404", 20},
		{"baby-names", "400", 1},
		{"baby-names", "301", 1},
		{"", "400", 1},
	}
	for _, tt := range tests {
		if got := counterValue(t, ts.registry, tt.db, tt.code); got != tt.want {
			t.Errorf("requests{db=%q,code=%q} = %v, want %v", tt.db, tt.code, got, tt.want)
		}
	}

	resp := ts.do(t, "GET", "/metrics")
	if resp.status != 200 {
		t.Fatalf("/metrics: %d", resp.status)
	}
	for _, want := range []string{
		"spangle_http_requests_total", "spangle_http_request_duration_seconds_bucket",
		"spangle_http_inflight_requests 0", `db="baby-names"`,
	} {
		if !strings.Contains(resp.body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(resp.body, "unknown-") {
		t.Errorf("unknown db names became label values")
	}
}

func TestMetricsPrivateRegistry(t *testing.T) {
	ts := startServer(t, newFake(), func(c *edge.Config) { c.Registerer = nil })
	ts.do(t, "GET", "/baby-names/1881")
	if body := ts.do(t, "GET", "/metrics").body; !strings.Contains(body, `spangle_http_requests_total{code="200",db="baby-names"} 1`) {
		t.Errorf("/metrics without a registry:\n%s", body)
	}
	// Two servers on one registry share the metrics instead of failing.
	reg := prometheus.NewRegistry()
	for range 2 {
		cfg := edge.DefaultConfig()
		cfg.Backend, cfg.Registerer = newFake(), reg
		if _, err := edge.NewServer(cfg); err != nil {
			t.Fatalf("NewServer on a shared registry: %v", err)
		}
	}
}

// logRecorder is a slog.Handler that keeps the messages and attributes.
type logRecorder struct {
	mu   sync.Mutex
	recs []string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
	l.mu.Lock()
	l.recs = append(l.recs, b.String())
	l.mu.Unlock()
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }
func (l *logRecorder) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.recs, "\n")
}

func TestClientGone(t *testing.T) {
	b := newFake()
	logs := &logRecorder{}
	ts := startServer(t, b, func(c *edge.Config) { c.Logger = slog.New(logs) })
	// A first lookup shows that the backend knows the db, so that the
	// failure below is counted under its name.
	ts.do(t, "GET", "/baby-names/warm")
	started := make(chan struct{})
	b.mu.Lock()
	b.get = func(ctx context.Context, db string, key []byte, opts node.GetOptions) (node.Result, error) {
		close(started)
		<-ctx.Done()
		return node.Result{}, fmt.Errorf("node: proxy: %w", ctx.Err())
	}
	b.mu.Unlock()

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.url+"/baby-names/slow", nil)
	done := make(chan error, 1)
	go func() {
		resp, err := ts.client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("client: %v, want context.Canceled", err)
	}
	checkFor(t, 5*time.Second, "a 499 in the metrics", func() bool {
		return counterValue(t, ts.registry, "baby-names", "499") == 1
	})
	checkFor(t, 5*time.Second, "a 499 in the log", func() bool {
		return strings.Contains(logs.all(), "status=499")
	})
}

func TestErrorsLogged(t *testing.T) {
	b := newFake()
	b.dbs["x"] = fakeDB{err: errors.New("disk on fire")}
	b.dbs["y"] = fakeDB{err: node.ErrUnknownDB}
	logs := &logRecorder{}
	ts := startServer(t, b, func(c *edge.Config) { c.Logger = slog.New(logs) })
	ts.do(t, "GET", "/x/k")
	ts.do(t, "GET", "/y/k")
	ts.do(t, "GET", "/baby-names/k")
	got := logs.all()
	if !strings.Contains(got, "ERROR edge: lookup failed") || !strings.Contains(got, "disk on fire") {
		t.Errorf("500 not logged: %q", got)
	}
	if strings.Count(got, "\n") != 0 {
		t.Errorf("more than the one failure logged: %q", got)
	}
}

func TestSlowloris(t *testing.T) {
	const timeout = 50 * time.Millisecond
	ts := startServer(t, newFake(), func(c *edge.Config) { c.ReadHeaderTimeout = timeout })
	// The server's clock starts when it accepts, which may be before Dial
	// returns: start ours before dialling, so that it cannot start later.
	start := time.Now()
	conn, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	request := "GET /baby-names/1881 HTTP/1.1\r\nHost: x\r\nUser-Agent: slowloris\r\n\r\n"
	buf := make([]byte, 512)
	for i := 0; ; i++ {
		if i == len(request) {
			t.Fatalf("the whole request went through at one byte per %v", 2*timeout/5)
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("server did not close a slow connection")
		}
		if _, err := conn.Write([]byte{request[i]}); err != nil {
			break // closed
		}
		// Poll for the close: a read that times out means the connection
		// is still open, so send the next byte.
		conn.SetReadDeadline(time.Now().Add(2 * timeout / 5))
		n, err := conn.Read(buf)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			continue
		}
		if n > 0 || err == nil {
			// net/http may answer 400 or 408 before it closes.
			if !strings.HasPrefix(string(buf[:n]), "HTTP/1.1 4") {
				t.Fatalf("unexpected answer %q", buf[:n])
			}
		}
		break
	}
	if elapsed := time.Since(start); elapsed < timeout {
		t.Errorf("closed after %v, before ReadHeaderTimeout %v", elapsed, timeout)
	}
}

func TestServerTimeoutsApply(t *testing.T) {
	// A whole request within the limits still works on a server with tiny
	// timeouts; an idle keep-alive connection is closed after IdleTimeout.
	ts := startServer(t, newFake(), func(c *edge.Config) {
		c.ReadHeaderTimeout = 200 * time.Millisecond
		c.IdleTimeout = 50 * time.Millisecond
	})
	conn, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /baby-names/1881 HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	start := time.Now()
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("idle connection sent data")
	} else if ne := (net.Error)(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("idle connection not closed by IdleTimeout")
	}
	if elapsed := time.Since(start); elapsed > 4*time.Second {
		t.Errorf("idle close took %v", elapsed)
	}
}

// serveOnLoopback serves a server with b as its backend on a loopback
// listener; served gets Serve's result.
func serveOnLoopback(t *testing.T, b edge.Backend) (srv *edge.Server, l net.Listener, served chan error) {
	t.Helper()
	cfg := edge.DefaultConfig()
	cfg.Backend = b
	srv, err := edge.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	served = make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	return srv, l, served
}

func TestShutdown(t *testing.T) {
	srv, l, served := serveOnLoopback(t, newFake())
	resp, err := http.Get("http://" + l.Addr().String() + "/livez")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := range 3 {
		if err := srv.Shutdown(ctx); err != nil {
			t.Fatalf("Shutdown #%d: %v", i+1, err)
		}
	}
	if err := <-served; err != nil {
		t.Errorf("Serve after Shutdown: %v, want nil", err)
	}
	if _, err := net.Dial("tcp", l.Addr().String()); err == nil {
		t.Error("listener still open after Shutdown")
	}
}

// TestShutdownDeadline: a Shutdown whose context ends while a request is
// still running returns the context's error, and still releases the
// connection: the client sees it closed and the handler's request
// context ends.
func TestShutdownDeadline(t *testing.T) {
	b := newFake()
	started, ended := make(chan struct{}), make(chan struct{})
	b.get = func(ctx context.Context, _ string, _ []byte, _ node.GetOptions) (node.Result, error) {
		close(started)
		<-ctx.Done()
		close(ended)
		return node.Result{}, ctx.Err()
	}
	srv, l, served := serveOnLoopback(t, b)
	answered := make(chan error, 1)
	go func() {
		resp, err := http.Get("http://" + l.Addr().String() + "/db/key")
		if err == nil {
			resp.Body.Close()
		}
		answered <- err
	}()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want the context's deadline", err)
	}
	select { // the handler's request context ends with the connection
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the request's handler still runs after Shutdown returned")
	}
	if err := <-answered; err == nil {
		t.Error("the request got an answer from a server shut down under it")
	}
	if err := <-served; err != nil {
		t.Errorf("Serve after Shutdown: %v, want nil", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*edge.Config)
		ok     bool
	}{
		{"default with backend", func(*edge.Config) {}, true},
		{"no backend", func(c *edge.Config) { c.Backend = nil }, false},
		{"no node name", func(c *edge.Config) { c.NodeName = "" }, false},
		{"zero read header timeout", func(c *edge.Config) { c.ReadHeaderTimeout = 0 }, false},
		{"negative read timeout", func(c *edge.Config) { c.ReadTimeout = -1 }, false},
		{"zero write timeout", func(c *edge.Config) { c.WriteTimeout = 0 }, false},
		{"zero idle timeout", func(c *edge.Config) { c.IdleTimeout = 0 }, false},
		{"zero max header bytes", func(c *edge.Config) { c.MaxHeaderBytes = 0 }, false},
		{"registry", func(c *edge.Config) { c.Registerer = prometheus.NewRegistry() }, true},
		{"registerer without gatherer", func(c *edge.Config) {
			c.Registerer = prometheus.WrapRegistererWith(prometheus.Labels{"a": "b"}, prometheus.NewRegistry())
		}, false},
		{"registerer with gatherer", func(c *edge.Config) {
			reg := prometheus.NewRegistry()
			c.Registerer = prometheus.WrapRegistererWith(prometheus.Labels{"a": "b"}, reg)
			c.Gatherer = reg
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := edge.DefaultConfig()
			cfg.Backend = newFake()
			tt.change(&cfg)
			err := cfg.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("Validate: %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, edge.ErrInvalidConfig) {
				t.Errorf("%v does not wrap ErrInvalidConfig", err)
			}
			if _, nerr := edge.NewServer(cfg); (nerr == nil) != tt.ok {
				t.Errorf("NewServer: %v, want ok=%v", nerr, tt.ok)
			}
		})
	}
}

func TestHeadMatchesGet(t *testing.T) {
	b := newFake()
	b.status = statusOf(map[string]string{"names": node.StateActive})
	ts := startServer(t, b)
	for _, path := range []string{"/", "/names/", "/healthz", "/livez", "/readyz", "/baby-names/1881", "/names/nobody"} {
		for _, accept := range []string{"application/json", "text/html"} {
			t.Run(path+" "+accept, func(t *testing.T) {
				get := ts.do(t, "GET", path, "Accept", accept)
				head := ts.do(t, "HEAD", path, "Accept", accept)
				if head.status != get.status || head.body != "" {
					t.Errorf("HEAD: %d %q; GET: %d", head.status, head.body, get.status)
				}
				if get.length >= 0 && head.length != get.length {
					t.Errorf("HEAD Content-Length %d, GET %d", head.length, get.length)
				}
				if head.header.Get("Content-Type") != get.header.Get("Content-Type") {
					t.Errorf("HEAD Content-Type %q, GET %q", head.header.Get("Content-Type"), get.header.Get("Content-Type"))
				}
			})
		}
	}
}

func TestMaxHeaderBytes(t *testing.T) {
	ts := startServer(t, newFake(), func(c *edge.Config) { c.MaxHeaderBytes = 1 << 10 })
	if resp := ts.do(t, "GET", "/baby-names/1881", "X-Big", strings.Repeat("x", 8<<10)); resp.status != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("status %d, want 431", resp.status)
	}
	if resp := ts.do(t, "GET", "/baby-names/1881"); resp.status != http.StatusOK {
		t.Errorf("small request: status %d", resp.status)
	}
}

// TestInflightGauge: spangle_http_inflight_requests counts the lookups
// being answered, by two servers on one registry together, and falls
// back to 0 once they are answered.
func TestInflightGauge(t *testing.T) {
	release := make(chan struct{})
	var waiting atomic.Int32
	f := newFake()
	f.get = func(ctx context.Context, db string, key []byte, opts node.GetOptions) (node.Result, error) {
		waiting.Add(1)
		<-release
		return node.Result{Value: []byte("v"), Found: true, Version: "1"}, nil
	}
	a := startServer(t, f)
	b := startServer(t, f, func(c *edge.Config) { c.Registerer = a.registry })
	inflight := func() float64 { return bare.Metric(t, a.registry, "spangle_http_inflight_requests") }
	var wg sync.WaitGroup
	for i, ts := range []*testServer{a, a, b} {
		wg.Go(func() {
			resp, err := ts.client.Get(fmt.Sprintf("%s/baby-names/k%d", ts.url, i))
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("status %d", resp.StatusCode)
			}
		})
	}
	checkFor(t, 30*time.Second, "three lookups waiting", func() bool { return waiting.Load() == 3 })
	if got := inflight(); got != 3 {
		t.Errorf("%v lookups in flight, want 3", got)
	}
	close(release)
	wg.Wait()
	if got := inflight(); got != 0 {
		t.Errorf("%v lookups in flight once answered, want 0", got)
	}
}
