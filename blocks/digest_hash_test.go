package blocks

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// TestSumLanes: sum64Lanes is XXH64 of the input and of the input with
// another first byte, for every length up to 300 bytes and beyond, and
// leaves its input as it was.
func TestSumLanes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 1; n < 300; n++ {
		for range 5 {
			b := make([]byte, n+rng.IntN(2)*rng.IntN(5000))
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			before := bytes.Clone(b)
			second := byte(rng.Uint32())
			h1, h2 := sum64Lanes(b, second)
			if !bytes.Equal(b, before) {
				t.Fatalf("length %d: input changed", len(b))
			}
			other := bytes.Clone(b)
			other[0] = second
			if w1, w2 := xxhash.Sum64(b), xxhash.Sum64(other); h1 != w1 || h2 != w2 {
				t.Fatalf("length %d: %016x %016x, want %016x %016x", len(b), h1, h2, w1, w2)
			}
		}
	}
}

// BenchmarkSumLanes hashes a record of 120 bytes in the digest's two
// lanes: in one pass (lanes) and with two calls to xxhash.Sum64 (two).
func BenchmarkSumLanes(b *testing.B) {
	rec := make([]byte, 120)
	for i := range rec {
		rec[i] = byte(i * 7)
	}
	var sink uint64
	b.Run("lanes", func(b *testing.B) {
		for b.Loop() {
			h1, h2 := sum64Lanes(rec, 2)
			sink += h1 + h2
		}
	})
	b.Run("two", func(b *testing.B) {
		for b.Loop() {
			rec[0] = 1
			h1 := xxhash.Sum64(rec)
			rec[0] = 2
			sink += h1 + xxhash.Sum64(rec)
		}
	})
	_ = sink
}
