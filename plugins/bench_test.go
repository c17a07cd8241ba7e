package plugins

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/spangledb/spangle/plugins/partition"
)

var benchSink int

// benchKey is the 16-byte key of the partitioner benchmarks.
var benchKey = []byte("0123456789abcdef")

// BenchmarkPartition compares the per-key cost of a Wasm partitioner
// (testdata/murmur3.wat) with the built-in murmur3 it reproduces: one call
// per key, and per key of 1024-key batches. examples/plugins/murmur3 has
// the same figures for a Go guest.
func BenchmarkPartition(b *testing.B) {
	b.Run("builtin", func(b *testing.B) {
		for b.Loop() {
			benchSink += partition.Murmur3(benchKey, 16)
		}
	})
	b.Run("wat/call", func(b *testing.B) {
		p := openPartitioner(b, "murmur3", testConfig(b))
		for b.Loop() {
			n, _, err := p.Partition(benchKey, 16)
			if err != nil {
				b.Fatal(err)
			}
			benchSink += n
		}
	})
	b.Run("wat/batch", func(b *testing.B) {
		p := openPartitioner(b, "murmur3", testConfig(b))
		benchBatch(b, p)
	})
}

// benchBatch measures PartitionBatch over 1024 16-byte keys, and reports
// ns/key.
func benchBatch(b *testing.B, p *WasmPartitioner) {
	keys := randomKeys(9, 1024, 16)
	for i := range keys {
		keys[i] = append(keys[i][:0], benchKey...)
		keys[i][0] = byte(i)
	}
	out := make([]int, len(keys))
	for b.Loop() {
		if err := p.PartitionBatch(keys, 16, out); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(keys)), "ns/key")
}

// BenchmarkDecode measures the per-call overhead of a decoder: echo.wat
// returns a 100-byte value unchanged.
func BenchmarkDecode(b *testing.B) {
	d := openDecoder(b, "echo", testConfig(b))
	val := make([]byte, 100)
	ctx := context.Background()
	for b.Loop() {
		out, err := d.Decode(ctx, val)
		if err != nil {
			b.Fatal(err)
		}
		benchSink += len(out)
	}
}

// BenchmarkPool measures per-key calls from 1 and 8 concurrent callers on
// a pool of GOMAXPROCS instances.
func BenchmarkPool(b *testing.B) {
	for _, callers := range []int{1, 8} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			cfg := testConfig(b)
			cfg.PoolSize = runtime.GOMAXPROCS(0)
			p := openPartitioner(b, "murmur3", cfg)
			if callers == 1 {
				for b.Loop() {
					if _, _, err := p.Partition(benchKey, 16); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, _, err := p.Partition(benchKey, 16); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
