package kvwatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/spangledb/spangle/kvwatch/natstest"
	"github.com/spangledb/spangle/node/nodetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, natstest.LeakOptions()...)
}

// testLogger discards unless KVWATCH_TEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("KVWATCH_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testConfig returns a configuration with short timings: entries live 1s.
// With no URLs it runs an embedded server on a random port.
func testConfig(t testing.TB, urls ...string) Config {
	t.Helper()
	c := DefaultConfig()
	c.URLs = urls
	c.EmbeddedListen = "127.0.0.1:-1"
	c.EmbeddedStoreDir = t.TempDir()
	c.ClusterName = "test"
	c.EntryTTL = time.Second
	c.Heartbeat = 200 * time.Millisecond
	c.OpTimeout = time.Second
	c.ReconnectWait = 50 * time.Millisecond
	c.Logger = testLogger()
	return c
}

// startKV starts a KV, waits until it is ready, and shuts it down at
// cleanup.
func startKV(t testing.TB, c Config) *KV {
	t.Helper()
	k := newKV(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := k.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	waitReady(t, k)
	return k
}

// newKV creates a KV that is shut down at cleanup.
func newKV(t testing.TB, c Config) *KV {
	t.Helper()
	k, err := New(c)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = k.Shutdown(ctx)
	})
	return k
}

func waitReady(t testing.TB, k *KV) {
	t.Helper()
	select {
	case <-k.Ready():
	case <-time.After(15 * time.Second):
		t.Fatal("KV not ready after 15s")
	}
	if s := k.Snapshot(); s.Stale() || !s.Connected() {
		t.Fatalf("ready but snapshot stale=%v connected=%v", s.Stale(), s.Connected())
	}
}

// waitFor polls cond every 10ms until it returns nil, and fails the test
// with cond's last error after d.
func waitFor(t testing.TB, d time.Duration, what string, cond func() error) {
	t.Helper()
	nodetest.WaitFor(t, d, what, cond)
}

// hasValue is a waitFor condition: key in bucket b of k's snapshot holds
// want.
func hasValue(k *KV, b Bucket, key, want string) func() error {
	return func() error {
		e, ok := k.Snapshot().Get(b, key)
		if !ok {
			return fmt.Errorf("%s %s missing", b, key)
		}
		if string(e.Value) != want {
			return fmt.Errorf("%s %s = %q, want %q", b, key, e.Value, want)
		}
		return nil
	}
}

// hasNoKey is a waitFor condition: key is absent from bucket b.
func hasNoKey(k *KV, b Bucket, key string) func() error {
	return func() error {
		if e, ok := k.Snapshot().Get(b, key); ok {
			return fmt.Errorf("%s %s still present (revision %d)", b, key, e.Revision)
		}
		return nil
	}
}

// rawKV is a plain client's handle on bucket b of cluster "test", closed
// at cleanup: it plays another writer, or inspects what is on the server.
func rawKV(t testing.TB, url string, b Bucket) jetstream.KeyValue {
	t.Helper()
	js := natstest.JetStream(t, url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, bucketName("test", b))
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// rawGet reads key from kv with a short timeout.
func rawGet(kv jetstream.KeyValue, key string) (jetstream.KeyValueEntry, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return kv.Get(ctx, key)
}

// proxy is a loopback TCP proxy that can cut its connections, to take a
// client off a server that keeps running, or hold what they carry, as a
// server that stops answering.
type proxy struct {
	l      net.Listener
	target string

	mu     sync.Mutex // guards up, conns, held and heldData
	up     bool
	conns  map[net.Conn]struct{}
	held   bool
	heldAt sync.Cond // on mu: broadcast when held ends
	// heldData is what the connections carried while held.
	heldData []byte
	wg       sync.WaitGroup
}

func newProxy(t testing.TB, target string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l, target: target, up: true, conns: map[net.Conn]struct{}{}}
	p.heldAt.L = &p.mu
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		l.Close()
		p.hold(false)
		p.setUp(false)
		p.wg.Wait()
	})
	return p
}

// hold keeps (true) what the connections carry, both ways, without
// closing them, until hold(false) forwards it.
func (p *proxy) hold(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held = on
	if !on {
		p.heldAt.Broadcast()
	}
}

// holds reports whether the connections carried s while held.
func (p *proxy) holds(s string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Contains(string(p.heldData), s)
}

// pass returns once b may go on: at once unless held.
func (p *proxy) pass(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held {
		p.heldData = append(p.heldData, b...)
	}
	for p.held {
		p.heldAt.Wait()
	}
}

func (p *proxy) url() string { return "nats://" + p.l.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if !p.up {
			p.mu.Unlock()
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c], p.conns[s] = struct{}{}, struct{}{}
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			buf := make([]byte, 32<<10)
			for {
				n, err := src.Read(buf)
				if n > 0 {
					p.pass(buf[:n])
					if _, werr := dst.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			dst.Close()
			src.Close()
		}
		p.wg.Go(func() { pipe(s, c) })
		p.wg.Go(func() { pipe(c, s) })
	}
}

// setUp lets connections through, or cuts the current ones and refuses new
// ones.
func (p *proxy) setUp(up bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.up = up
	if !up {
		for c := range p.conns {
			c.Close()
		}
		clear(p.conns)
	}
}

// clusterConfigs returns configurations for n embedded servers forming one
// NATS cluster, with buckets of n replicas.
func clusterConfigs(t testing.TB, n int) []Config {
	t.Helper()
	ports := make([]int, n)
	routes := make([]string, n)
	for i := range ports {
		ports[i] = natstest.FreePort(t)
		routes[i] = "nats://127.0.0.1:" + strconv.Itoa(ports[i])
	}
	cfgs := make([]Config, n)
	for i := range cfgs {
		c := testConfig(t)
		c.EmbeddedServerName = "s" + strconv.Itoa(i+1)
		c.EmbeddedClusterName = "kvwatch-test"
		c.EmbeddedClusterListen = "127.0.0.1:" + strconv.Itoa(ports[i])
		c.EmbeddedRoutes = routes
		c.Replicas = n
		c.OpTimeout = 2 * time.Second
		cfgs[i] = c
	}
	return cfgs
}

// startAll starts the KVs concurrently (a JetStream cluster needs a quorum
// before any bucket can be created) and waits until all are ready.
func startAll(t testing.TB, cfgs []Config) []*KV {
	t.Helper()
	kvs := make([]*KV, len(cfgs))
	for i, c := range cfgs {
		kvs[i] = newKV(t, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := make([]error, len(kvs))
	var wg sync.WaitGroup
	for i, k := range kvs {
		wg.Go(func() { errs[i] = k.Start(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("Start: %v", err)
	}
	for _, k := range kvs {
		waitReady(t, k)
	}
	return kvs
}
