package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/spangledb/spangle/kvwatch/natstest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/edge/client"
	"github.com/spangledb/spangle/edge/internal/edgetest"
	"github.com/spangledb/spangle/kvwatch"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, natstest.LeakOptions()...)
}

// Odd records of db "d".
var (
	binaryKey = append([]byte("bin\x00\n\xff\xfe"), bytes.Repeat([]byte{0x80, 0}, 508)...) // 1 KiB: NUL, newline, invalid UTF-8
	emptyKey  = []byte("empty-value")
	hugeKey   = []byte("huge")
	hugeValue = bytes.Repeat([]byte("x"), 1<<20) // 1 MiB: over NATS's default max_payload once headers are added
)

// testRecords are db "d"'s records: key-0..key-199 → "<version>:<i>" and
// the odd ones.
func testRecords(version string) []edgetest.Record {
	return append(edgetest.Numbered(version, 200),
		edgetest.Record{Key: binaryKey, Value: []byte("binary key's value")},
		edgetest.Record{Key: emptyKey, Value: []byte{}},
		edgetest.Record{Key: hugeKey, Value: hugeValue},
	)
}

// testNode is a node with its NATS metrics registry.
type testNode struct {
	*edgetest.Node
	reg *prometheus.Registry
}

func startNode(t *testing.T, kv *kvwatch.KV, root string) *testNode {
	t.Helper()
	reg := prometheus.NewRegistry()
	n := edgetest.StartNode(t, kv, root, edgetest.Options{NATS: func(c *edge.NATSConfig) { c.Registerer = reg }})
	return &testNode{Node: n, reg: reg}
}

// answered returns how many requests of op the node answered.
func (n *testNode) answered(op string) float64 {
	mfs, _ := n.reg.Gather()
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "spangle_nats_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" && l.GetValue() == op {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// newClient returns a started client, closed at cleanup. With a kv, it
// speaks NATS to kv's server (over TCP); else HTTP to urls.
func newClient(t *testing.T, kv *kvwatch.KV, urls ...string) *client.Client {
	t.Helper()
	cfg := client.DefaultConfig()
	cfg.ClusterName = edgetest.Cluster
	cfg.MapRetry = 50 * time.Millisecond
	cfg.Backoff = 5 * time.Millisecond
	if kv != nil {
		cfg.Conn = edgetest.Connect(t, kv.ClientURL())
	} else {
		cfg.URLs = urls
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	select {
	case <-c.Ready():
	case <-time.After(edgetest.Timeout):
		t.Fatal("client not ready")
	}
	return c
}

// waitRouted waits until the client's map routes db's keys to version.
func waitRouted(t *testing.T, c *client.Client, db, version string, nodes int) {
	t.Helper()
	edgetest.WaitFor(t, fmt.Sprintf("%s %s on %d nodes in the map", db, version, nodes), func() error {
		m := c.Map()
		if m.Versions[db].Version != version {
			return fmt.Errorf("versions entry %+v", m.Versions[db])
		}
		n := 0
		for _, p := range m.Partitions {
			if p.DB == db && p.Version == version {
				n++
			}
		}
		if n != nodes {
			return fmt.Errorf("%d partitions entries", n)
		}
		return nil
	})
}

type oneNode struct {
	kv   *kvwatch.KV
	node *testNode
	nats *client.Client
	http *client.Client
}

func startOneNode(t *testing.T) *oneNode {
	t.Helper()
	root := t.TempDir()
	edgetest.WriteVersion(t, root, "d", "v1", 4, testRecords("v1"))
	kv := edgetest.StartKV(t, edgetest.NATSConfig(t))
	n := startNode(t, kv, root)
	e := &oneNode{kv: kv, node: n, nats: newClient(t, kv), http: newClient(t, nil, n.HTTPURL)}
	waitRouted(t, e.nats, "d", "v1", 1)
	return e
}

func TestGet(t *testing.T) {
	e := startOneNode(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		db    string
		key   []byte
		found bool
		value []byte
		err   error
	}{
		{"found", "d", []byte("key-7"), true, []byte("v1:7"), nil},
		{"missing", "d", []byte("nope"), false, nil, nil},
		{"binary key", "d", binaryKey, true, []byte("binary key's value"), nil},
		{"empty value", "d", emptyKey, true, []byte{}, nil},
		{"empty key", "d", []byte{}, false, nil, nil},
		{"slash and dots", "d", []byte("../a/b/."), false, nil, nil},
		{"unknown db", "nope", []byte("key-7"), false, nil, client.ErrUnknownDB},
	} {
		for _, transport := range []struct {
			name string
			c    *client.Client
		}{{"nats", e.nats}, {"http", e.http}} {
			t.Run(tc.name+"/"+transport.name, func(t *testing.T) {
				res, err := transport.c.Get(ctx, tc.db, tc.key)
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				if err != nil {
					return
				}
				if res.Found != tc.found || !bytes.Equal(res.Value, tc.value) || res.Version != "v1" {
					t.Fatalf("got %+v, want found=%v %q", res, tc.found, tc.value)
				}
				if tc.found && res.Value == nil {
					t.Fatal("a found empty value must be non-nil")
				}
			})
		}
	}
	if got := e.node.answered("part"); got == 0 {
		t.Error("the NATS client never used a part subject")
	}
}

// TestLargeValue: a 1 MiB value comes over HTTP; over NATS it exceeds
// max_payload, which the client reports at once as ErrTooLarge.
func TestLargeValue(t *testing.T) {
	e := startOneNode(t)
	ctx := context.Background()
	res, err := e.http.Get(ctx, "d", hugeKey)
	if err != nil || !bytes.Equal(res.Value, hugeValue) {
		t.Fatalf("HTTP: %d bytes, %v", len(res.Value), err)
	}
	start := time.Now()
	_, err = e.nats.Get(ctx, "d", hugeKey)
	var se *client.StatusError
	if !errors.Is(err, client.ErrTooLarge) || !errors.As(err, &se) || !strings.Contains(se.Message, "max_payload") {
		t.Fatalf("NATS: %v, want ErrTooLarge naming max_payload", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("NATS answered after %v", d)
	}
	// A request itself over max_payload fails in the client.
	_, err = e.nats.Get(ctx, "d", append(bytes.Clone(hugeValue), 'x'))
	if !errors.Is(err, client.ErrTooLarge) {
		t.Fatalf("NATS request over max_payload: %v", err)
	}
}

func TestGetMany(t *testing.T) {
	e := startOneNode(t)
	ctx := context.Background()
	keys := [][]byte{[]byte("key-1"), []byte("nope"), binaryKey, []byte("key-1"), emptyKey, {}, []byte("key-199")}
	want := []string{"v1:1", "", "binary key's value", "v1:1", "", "", "v1:199"}
	found := []bool{true, false, true, true, true, false, true}
	for _, c := range []*client.Client{e.nats, e.http} {
		rs, err := c.GetMany(ctx, "d", keys)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rs {
			if r.Found != found[i] || string(r.Value) != want[i] || r.Version != "v1" {
				t.Errorf("key %q: %+v, want found=%v %q", keys[i], r, found[i], want[i])
			}
		}
		if _, err := c.GetMany(ctx, "nope", keys); !errors.Is(err, client.ErrUnknownDB) {
			t.Errorf("unknown db: %v", err)
		}
		if _, err := c.GetMany(ctx, "d", make([][]byte, edge.DefaultMaxBatchKeys+1)); !errors.Is(err, client.ErrTooLarge) {
			t.Errorf("too many keys: %v", err)
		}
	}
	// An answer over max_payload, on NATS only.
	if _, err := e.nats.GetMany(ctx, "d", [][]byte{hugeKey}); !errors.Is(err, client.ErrTooLarge) {
		t.Errorf("NATS batch over max_payload: %v", err)
	}
	if rs, err := e.http.GetMany(ctx, "d", [][]byte{hugeKey}); err != nil || len(rs[0].Value) != len(hugeValue) {
		t.Errorf("HTTP batch of a large value: %v", err)
	}
}

// TestUnknownPartitioner: a version whose partitioner the client lacks (a
// Wasm module it was not given) is read through the get subject.
func TestUnknownPartitioner(t *testing.T) {
	e := startOneNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), edgetest.Timeout)
	defer cancel()
	// The node writes the db's versions entry once, as v1 becomes active:
	// wait for it, so that it cannot land after the overwrite below.
	edgetest.WaitFor(t, "the node's versions entry", func() error {
		if p := e.nats.Map().Versions["d"].Partitioner; p != "sequins" {
			return fmt.Errorf("partitioner %q", p)
		}
		return nil
	})
	// Overwrite the db's versions entry as a node with a Wasm partitioner
	// would write it.
	if _, err := e.kv.Put(ctx, kvwatch.Versions, "d", []byte(`{"db":"d","version":"v1","num_partitions":4,"partitioner":"wasm:sha256:00"}`)); err != nil {
		t.Fatal(err)
	}
	edgetest.WaitFor(t, "wasm identity in the map", func() error {
		if p := e.nats.Map().Versions["d"].Partitioner; p != "wasm:sha256:00" {
			return fmt.Errorf("partitioner %q", p)
		}
		return nil
	})
	before := e.node.answered("get")
	res, err := e.nats.Get(ctx, "d", []byte("key-3"))
	if err != nil || string(res.Value) != "v1:3" {
		t.Fatalf("%+v %v", res, err)
	}
	if e.node.answered("get") != before+1 {
		t.Error("the lookup did not take the get subject")
	}
}

// TestNodeLeaves: two nodes serve the same data, the second on the first
// one's embedded NATS; while clients loop, the second stops. Every lookup
// still succeeds.
func TestNodeLeaves(t *testing.T) {
	root := t.TempDir()
	edgetest.WriteVersion(t, root, "d", "v1", 4, testRecords("v1"))
	kvA := edgetest.StartKV(t, edgetest.NATSConfig(t))
	a := startNode(t, kvA, root)
	kvB := edgetest.StartKV(t, edgetest.NATSConfig(t, kvA.ClientURL()))
	b := startNode(t, kvB, root)
	nc := newClient(t, kvA)
	hc := newClient(t, nil, a.HTTPURL, b.HTTPURL)
	waitRouted(t, nc, "d", "v1", 2)

	var stop atomic.Bool
	var wg sync.WaitGroup
	var done atomic.Int64
	errs := make(chan error, 8)
	loop := func(name string, c *client.Client, many bool) {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			k := i % 200
			var got []byte
			var err error
			if many {
				var rs []client.Result
				rs, err = c.GetMany(context.Background(), "d", [][]byte{fmt.Appendf(nil, "key-%d", k)})
				if err == nil {
					got = rs[0].Value
				}
			} else {
				var res client.Result
				res, err = c.Get(context.Background(), "d", fmt.Appendf(nil, "key-%d", k))
				got = res.Value
			}
			if err == nil && string(got) != fmt.Sprintf("v1:%d", k) {
				err = fmt.Errorf("key-%d = %q", k, got)
			}
			if err != nil {
				errs <- fmt.Errorf("%s: %w", name, err)
				return
			}
			done.Add(1)
		}
	}
	for _, l := range []struct {
		name string
		c    *client.Client
		many bool
	}{{"nats get", nc, false}, {"nats mget", nc, true}, {"http get", hc, false}, {"http mget", hc, true}} {
		wg.Add(1)
		go loop(l.name, l.c, l.many)
	}
	edgetest.WaitFor(t, "both nodes answering part requests", func() error {
		if a.answered("part") == 0 || b.answered("part") == 0 || len(errs) > 0 {
			return fmt.Errorf("a %v, b %v", a.answered("part"), b.answered("part"))
		}
		return nil
	})
	b.Stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), edgetest.Timeout)
	defer cancel()
	if err := kvB.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	after := done.Load()
	edgetest.WaitFor(t, "lookups after the node left", func() error {
		if n := done.Load() - after; n < 500 && len(errs) == 0 {
			return fmt.Errorf("%d lookups", n)
		}
		return nil
	})
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	edgetest.WaitFor(t, "b gone from the map", func() error {
		m := nc.Map()
		if len(m.Nodes) != 1 {
			return fmt.Errorf("%d nodes", len(m.Nodes))
		}
		return nil
	})
}

// TestUpgrade: the client follows v1 → v2, never goes back, and keeps
// answering while v1's part subjects go away.
func TestUpgrade(t *testing.T) {
	root := t.TempDir()
	edgetest.WriteVersion(t, root, "d", "v1", 4, testRecords("v1"))
	kv := edgetest.StartKV(t, edgetest.NATSConfig(t))
	n := startNode(t, kv, root)
	c := newClient(t, kv)
	waitRouted(t, c, "d", "v1", 1)

	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		last := ""
		for i := 0; !stop.Load(); i++ {
			k := i % 200
			res, err := c.Get(context.Background(), "d", fmt.Appendf(nil, "key-%d", k))
			if err == nil && (res.Version < last || string(res.Value) != fmt.Sprintf("%s:%d", res.Version, k)) {
				err = fmt.Errorf("key-%d = %q from %s after %s", k, res.Value, res.Version, last)
			}
			if err != nil {
				errs <- err
				return
			}
			last = res.Version
		}
	}()
	edgetest.WriteVersion(t, root, "d", "v2", 3, testRecords("v2"))
	n.Refresh()
	waitRouted(t, c, "d", "v2", 1)
	edgetest.WaitFor(t, "v1 retired from the map", func() error {
		for _, p := range c.Map().Partitions {
			if p.Version == "v1" {
				return fmt.Errorf("v1 entry %+v", p)
			}
		}
		return nil
	})
	res, err := c.Get(context.Background(), "d", []byte("key-5"))
	if err != nil || string(res.Value) != "v2:5" {
		t.Errorf("after the upgrade: %+v %v", res, err)
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*client.Config)
		text string
	}{
		{"neither", func(c *client.Config) {}, "either URLs"},
		{"both", func(c *client.Config) { c.URLs = []string{"http://a"}; c.Conn = new(nats.Conn) }, "either URLs"},
		{"bad URL", func(c *client.Config) { c.URLs = []string{"a:1"} }, "want http://host:port"},
		{"cluster", func(c *client.Config) { c.URLs = []string{"http://a"}; c.ClusterName = "a.b" }, "ClusterName"},
		{"timeout", func(c *client.Config) { c.URLs = []string{"http://a"}; c.Timeout = 0 }, "Timeout"},
		{"backoff", func(c *client.Config) { c.URLs = []string{"http://a"}; c.Backoff = time.Hour }, "Backoff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := client.DefaultConfig()
			tc.mod(&cfg)
			_, err := client.New(cfg)
			if !errors.Is(err, client.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("err = %v, want one naming %q", err, tc.text)
			}
		})
	}
}

// TestUnavailable: with no node, a lookup fails after its attempts with
// ErrUnavailable, within the configured timeouts, saying "client: " once
// (it said "client: no node answered: client: GET …").
func TestUnavailable(t *testing.T) {
	cfg := client.DefaultConfig()
	cfg.URLs = []string{"http://127.0.0.1:1"} // nothing listens on port 1
	cfg.Backoff = time.Millisecond
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	_, err = c.Get(context.Background(), "d", []byte("k"))
	if !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("err = %v", err)
	}
	if n := strings.Count(err.Error(), "client: "); n != 1 || !strings.Contains(err.Error(), "GET http://127.0.0.1:1") {
		t.Errorf("the error says client: %d times, or not the URL: %v", n, err)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(context.Background(), "d", []byte("k")); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}
