package plugins

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"go.uber.org/goleak"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/spangledb/spangle/node/nodetest"
	"github.com/spangledb/spangle/plugins/partition"
)

// cacheDir is the compilation cache shared by the package's tests.
var cacheDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "spangle-plugins-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cacheDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	if err := goleak.Find(); code == 0 && err != nil {
		fmt.Fprintln(os.Stderr, "goroutines outlived the tests:", err)
		code = 1
	}
	os.Exit(code)
}

// testConfig is a config for tests: the shared cache, a small pool, a
// registry of its own.
func testConfig(tb testing.TB) Config {
	tb.Helper()
	c := DefaultConfig()
	c.CacheDir = cacheDir
	c.PoolSize = 4
	c.Registerer = prometheus.NewRegistry()
	// Generous: a loaded CI machine running -race must not time out a
	// call that is not about timeouts; those tests set their own.
	c.CallTimeout = 10 * time.Second
	return c
}

func fileIdentity(tb testing.TB, path string) string {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return "wasm:sha256:" + hex.EncodeToString(sum[:])
}

// openModule opens testdata/<name>.wasm with open (OpenPartitioner or
// OpenDecoder), closed on cleanup.
func openModule[M interface{ Close(context.Context) error }](tb testing.TB, open func(context.Context, string, Config) (M, error), name string, cfg Config) M {
	tb.Helper()
	m, err := open(context.Background(), "testdata/"+name+".wasm", cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := m.Close(context.Background()); err != nil {
			tb.Error(err)
		}
	})
	return m
}

// openPartitioner opens testdata/<name>.wasm, closed on cleanup.
func openPartitioner(tb testing.TB, name string, cfg Config) *WasmPartitioner {
	tb.Helper()
	return openModule(tb, OpenPartitioner, name, cfg)
}

// openDecoder opens testdata/<name>.wasm, closed on cleanup.
func openDecoder(tb testing.TB, name string, cfg Config) *WasmDecoder {
	tb.Helper()
	return openModule(tb, OpenDecoder, name, cfg)
}

// randomKeys returns n keys of random bytes, 0 to maxLen long.
func randomKeys(seed uint64, n, maxLen int) [][]byte {
	r := rand.New(rand.NewPCG(seed, 1))
	keys := make([][]byte, n)
	for i := range keys {
		k := make([]byte, r.IntN(maxLen+1))
		for j := range k {
			k[j] = byte(r.Uint32())
		}
		keys[i] = k
	}
	return keys
}

func TestWATMurmur3MatchesBuiltin(t *testing.T) {
	p := openPartitioner(t, "murmur3", testConfig(t))
	if want := fileIdentity(t, "testdata/murmur3.wasm"); p.Identity() != want {
		t.Fatalf("identity %s, want %s", p.Identity(), want)
	}
	if !p.Batched() {
		t.Fatal("Batched() = false")
	}
	keys := randomKeys(1, 20000, 70)
	for _, n := range []int{1, 7, 20, 1 << 20, 1<<31 - 1} {
		out := make([]int, len(keys))
		if err := p.PartitionBatch(keys, n, out); err != nil {
			t.Fatal(err)
		}
		for i, k := range keys {
			want := partition.Murmur3(k, n)
			if out[i] != want {
				t.Fatalf("n=%d: batch: key %x: %d, want %d", n, k, out[i], want)
			}
			if i%16 != 0 {
				continue // per-key calls on a sample: they cost ~1 µs each
			}
			got, alt, err := p.Partition(k, n)
			if err != nil || got != want || alt != want {
				t.Fatalf("n=%d: key %x: Partition = %d, %d, %v; want %d", n, k, got, alt, err, want)
			}
		}
	}
}

func TestPartitionBatchChunks(t *testing.T) {
	p := openPartitioner(t, "murmur3", testConfig(t))
	// More keys than one call takes, then keys over batchMaxBytes together,
	// then one key larger than the initial scratch buffer.
	var keys [][]byte
	keys = append(keys, randomKeys(2, batchMaxKeys*2+17, 20)...)
	for i := range 5 {
		keys = append(keys, bytes.Repeat([]byte{byte(i)}, batchMaxBytes/3))
	}
	keys = append(keys, bytes.Repeat([]byte("k"), 3*batchMaxBytes))
	out := make([]int, len(keys)+3) // longer than keys is fine
	if err := p.PartitionBatch(keys, 97, out); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if want := partition.Murmur3(k, 97); out[i] != want {
			t.Fatalf("key %d (%d bytes): %d, want %d", i, len(k), out[i], want)
		}
	}
	if err := p.PartitionBatch(keys, 97, out[:3]); err == nil {
		t.Fatal("short out: no error")
	}
	if err := p.PartitionBatch(nil, 97, nil); err != nil {
		t.Fatal(err)
	}
}

func TestPartitionCountOutOfRange(t *testing.T) {
	p := openPartitioner(t, "murmur3", testConfig(t))
	for _, n := range []int{0, -1, 1 << 31} {
		if _, _, err := p.Partition([]byte("k"), n); err == nil {
			t.Errorf("Partition(n=%d): no error", n)
		}
		if err := p.PartitionBatch([][]byte{[]byte("k")}, n, make([]int, 1)); err == nil {
			t.Errorf("PartitionBatch(n=%d): no error", n)
		}
	}
}

// TestPartitionFallback checks PartitionBatch on a module without the batch
// export: a call per key.
func TestPartitionFallback(t *testing.T) {
	p := openPartitioner(t, "sequins", testConfig(t))
	if p.Batched() {
		t.Fatal("Batched() = true")
	}
	keys := randomKeys(4, 3000, 30)
	out := make([]int, len(keys))
	if err := p.PartitionBatch(keys, 20, out); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if want, _ := partition.Sequins(k, 20); out[i] != want {
			t.Fatalf("key %x: %d, want %d", k, out[i], want)
		}
	}
}

// TestConcurrentPartition has many goroutines share one partitioner with a
// small pool (run with -race).
func TestConcurrentPartition(t *testing.T) {
	cfg := testConfig(t)
	cfg.PoolSize = 3
	p := openPartitioner(t, "murmur3", cfg)
	keys := randomKeys(3, 400, 40)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Go(func() {
			out := make([]int, len(keys))
			for i, k := range keys {
				if g%2 == 0 {
					p, _, err := p.Partition(k, 31)
					if err != nil {
						errs <- err
						return
					}
					out[i] = p
				}
			}
			if g%2 == 1 {
				if err := p.PartitionBatch(keys, 31, out); err != nil {
					errs <- err
					return
				}
			}
			for i, k := range keys {
				if want := partition.Murmur3(k, 31); out[i] != want {
					errs <- fmt.Errorf("goroutine %d: key %x: %d, want %d", g, k, out[i], want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(p.h.slots); n != cfg.PoolSize {
		t.Fatalf("%d slots after the calls, want %d", n, cfg.PoolSize)
	}
}

func TestClose(t *testing.T) {
	ctx := context.Background()
	p, err := OpenPartitioner(ctx, "testdata/murmur3.wasm", testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Partition([]byte("k"), 10); err != nil {
		t.Fatal(err)
	}
	// A caller holding an instance while Close runs: Close waits for it.
	in, err := p.h.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan error)
	go func() { closed <- p.Close(ctx) }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) with a call in flight", err)
	case <-p.h.done: // Close has begun
	}
	p.h.release(in)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, _, err := p.Partition([]byte("k"), 10); !errors.Is(err, ErrClosed) {
		t.Fatalf("Partition after Close: %v, want ErrClosed", err)
	}
	if err := p.PartitionBatch([][]byte{nil}, 10, make([]int, 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("PartitionBatch after Close: %v, want ErrClosed", err)
	}
}

// TestCloseStopsRunningCall closes a plugin whose call loops: Close gives up
// waiting at its ctx and stops the call.
func TestCloseStopsRunningCall(t *testing.T) {
	cfg := testConfig(t)
	cfg.CallTimeout = time.Hour
	p, err := OpenPartitioner(context.Background(), "testdata/hostile.wasm", cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		_, _, err := p.Partition([]byte("loop"), 10)
		done <- err
	}()
	waitFor(t, 10*time.Second, func() bool { return len(p.h.slots) < cfg.PoolSize })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("looping call returned no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not stop the running call")
	}
}

func TestPoolBoundsInstances(t *testing.T) {
	cfg := testConfig(t)
	cfg.PoolSize = 2
	p := openPartitioner(t, "murmur3", cfg)
	ctx := context.Background()
	a, err := p.h.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.h.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatal("one instance handed out twice")
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := p.h.acquire(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third acquire: %v, want a deadline error", err)
	}
	p.h.release(a)
	p.h.release(b)
	if _, _, err := p.Partition([]byte("k"), 3); err != nil {
		t.Fatal(err)
	}
}

func TestMetrics(t *testing.T) {
	cfg := testConfig(t)
	reg := cfg.Registerer.(*prometheus.Registry)
	p := openPartitioner(t, "hostile", cfg)
	p2 := openPartitioner(t, "murmur3", cfg) // shares the registry
	for range 3 {
		if _, _, err := p.Partition([]byte("zero"), 10); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := p.Partition([]byte("trap"), 10); !errors.Is(err, ErrPluginTrap) {
		t.Fatal(err)
	}
	if _, _, err := p2.Partition([]byte("k"), 10); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`
# HELP spangle_plugin_instances_discarded_total Wasm plugin instances discarded after a fault (a new one is created on demand), by module identity.
# TYPE spangle_plugin_instances_discarded_total counter
spangle_plugin_instances_discarded_total{module=%q} 1
spangle_plugin_instances_discarded_total{module=%q} 0
`, p.Identity(), p2.Identity())
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "spangle_plugin_instances_discarded_total"); err != nil {
		t.Error(err)
	}
	calls := testutil.ToFloat64(p.h.metrics.calls[fnPartition])
	if calls != 4 {
		t.Errorf("partition calls %v, want 4", calls)
	}
	if n := testutil.ToFloat64(p.h.metrics.errors[kindTrap]); n != 1 {
		t.Errorf("trap errors %v, want 1", n)
	}
	if n, err := testutil.GatherAndCount(reg, "spangle_plugin_call_seconds"); err != nil || n == 0 {
		t.Errorf("call_seconds series: %d, %v", n, err)
	}
}

// waitFor polls cond until it holds or d passes.
func waitFor(tb testing.TB, d time.Duration, cond func() bool) {
	tb.Helper()
	nodetest.WaitFor(tb, d, "condition", nodetest.True(cond))
}

// TestMinimalExample runs the worked example of ABI.md, which must be
// testdata/minimal.wat verbatim.
func TestMinimalExample(t *testing.T) {
	doc, err := os.ReadFile("ABI.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("testdata/minimal.wat")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, append([]byte("```wat\n"), src...)) {
		t.Error("ABI.md's WAT example differs from testdata/minimal.wat")
	}
	p := openPartitioner(t, "minimal", testConfig(t))
	keys := randomKeys(5, 2000, 40)
	out := make([]int, len(keys))
	if err := p.PartitionBatch(keys, 20, out); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if want, _ := partition.Sequins(k, 20); out[i] != want {
			t.Fatalf("key %x: %d, want %d", k, out[i], want)
		}
	}
	if _, _, err := p.Partition(make([]byte, 70000), 20); !errors.Is(err, ErrPluginMemory) {
		t.Fatalf("a key over its buffer: %v, want ErrPluginMemory", err)
	}
	if got, _, err := p.Partition([]byte("bar"), 20); err != nil || got != 19 {
		t.Fatalf("after the fault: %d, %v", got, err)
	}
}
