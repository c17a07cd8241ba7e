package main

import (
	"fmt"
	"go.uber.org/goleak"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"testing"

	"github.com/spangledb/spangle/examples/plugins/internal/wasmbuild"
	"github.com/spangledb/spangle/plugins"
	"github.com/spangledb/spangle/plugins/partition"
)

// guest is this package built for wasip1, once per test binary.
var guest wasmbuild.Guest

func TestMain(m *testing.M) {
	code := m.Run()
	guest.Cleanup()
	if err := goleak.Find(); code == 0 && err != nil {
		fmt.Fprintln(os.Stderr, "goroutines outlived the tests:", err)
		code = 1
	}
	os.Exit(code)
}

func open(tb testing.TB) *plugins.WasmPartitioner { return guest.OpenPartitioner(tb) }

// randomKeys returns n keys of random bytes and lengths up to maxLen.
func randomKeys(n, maxLen int) [][]byte {
	r := rand.New(rand.NewPCG(1, 2))
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = make([]byte, r.IntN(maxLen+1))
		for j := range keys[i] {
			keys[i][j] = byte(r.Uint32())
		}
	}
	return keys
}

// TestMatchesBuiltin checks the guest against plugins/partition.Murmur3 over
// 100,000 random keys, batched and (on a sample) per call.
func TestMatchesBuiltin(t *testing.T) {
	p := open(t)
	if !p.Batched() {
		t.Fatal("the module does not export spangle_partition_batch")
	}
	keys := randomKeys(100_000, 100)
	for _, n := range []int{1, 20, 1021, 1<<31 - 1} {
		out := make([]int, len(keys))
		if err := p.PartitionBatch(keys, n, out); err != nil {
			t.Fatal(err)
		}
		for i, k := range keys {
			want := partition.Murmur3(k, n)
			if out[i] != want {
				t.Fatalf("n=%d: key %x: batch %d, want %d", n, k, out[i], want)
			}
			if i%50 == 0 {
				if got, alt, err := p.Partition(k, n); err != nil || got != want || alt != want {
					t.Fatalf("n=%d: key %x: Partition = %d, %d, %v; want %d", n, k, got, alt, err, want)
				}
			}
		}
	}
}

// TestConcurrent shares the partitioner between goroutines (run with -race).
func TestConcurrent(t *testing.T) {
	p := open(t)
	keys := randomKeys(2000, 40)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i, k := range keys[g*100 : g*100+100] {
				got, _, err := p.Partition(k, 64)
				if err != nil || got != partition.Murmur3(k, 64) {
					errs <- fmt.Errorf("goroutine %d key %d: %d, %v", g, i, got, err)
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
}

var sink int

// BenchmarkPartition measures the Go guest against the built-in, for
// 16-byte keys: a call per key, and per key of 1024-key batches.
func BenchmarkPartition(b *testing.B) {
	key := []byte("0123456789abcdef")
	b.Run("builtin", func(b *testing.B) {
		for b.Loop() {
			sink += partition.Murmur3(key, 16)
		}
	})
	b.Run("go/call", func(b *testing.B) {
		p := open(b)
		for b.Loop() {
			n, _, err := p.Partition(key, 16)
			if err != nil {
				b.Fatal(err)
			}
			sink += n
		}
	})
	b.Run("go/batch", func(b *testing.B) {
		p := open(b)
		keys := make([][]byte, 1024)
		for i := range keys {
			keys[i] = append([]byte{byte(i), byte(i >> 8)}, key[2:]...)
		}
		out := make([]int, len(keys))
		for b.Loop() {
			if err := p.PartitionBatch(keys, 16, out); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(keys)), "ns/key")
	})
	b.Run("go/parallel", func(b *testing.B) {
		p := open(b)
		b.SetParallelism(max(1, 8/runtime.GOMAXPROCS(0)))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, _, err := p.Partition(key, 16); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
