package blocks

import (
	"encoding/binary"
	"math/bits"

	"github.com/cespare/xxhash/v2"
)

// XXH64's primes.
const (
	xxPrime1 uint64 = 11400714785074694791
	xxPrime2 uint64 = 14029467366897019727
	xxPrime3 uint64 = 1609587929392839161
	xxPrime4 uint64 = 9650029242287828579
	xxPrime5 uint64 = 2870177450012600261
)

// sum64Lanes returns XXH64 (seed 0) of b and of b with its first byte
// replaced by second: a record's digest hashes in its two lanes. Of an
// input of 32 bytes or more, the two hashes differ only in the first of
// XXH64's four accumulators: the other three are computed once, and the
// two hashes' rounds, independent, overlap in the CPU (BenchmarkSumLanes:
// about half the time of two calls to xxhash.Sum64 for records of 120
// bytes).
func sum64Lanes(b []byte, second byte) (uint64, uint64) {
	n := len(b)
	if n < 32 {
		h1 := xxhash.Sum64(b)
		first := b[0]
		b[0] = second
		h2 := xxhash.Sum64(b)
		b[0] = first
		return h1, h2
	}
	le := binary.LittleEndian
	w := le.Uint64(b)
	v1 := xxPrime1
	v1 += xxPrime2 // seed 0's first accumulator, modulo 2^64
	v1a := xxRound(v1, w)
	v1b := xxRound(v1, w&^0xff|uint64(second))
	v2 := xxRound(xxPrime2, le.Uint64(b[8:]))
	v3 := xxRound(0, le.Uint64(b[16:]))
	v4 := xxRound(^xxPrime1+1, le.Uint64(b[24:]))
	p := b[32:]
	for len(p) >= 32 {
		w := le.Uint64(p)
		v1a = xxRound(v1a, w)
		v1b = xxRound(v1b, w)
		v2 = xxRound(v2, le.Uint64(p[8:16]))
		v3 = xxRound(v3, le.Uint64(p[16:24]))
		v4 = xxRound(v4, le.Uint64(p[24:32]))
		p = p[32:]
	}
	rest := bits.RotateLeft64(v2, 7) + bits.RotateLeft64(v3, 12) + bits.RotateLeft64(v4, 18)
	ha := bits.RotateLeft64(v1a, 1) + rest
	hb := bits.RotateLeft64(v1b, 1) + rest
	ha, hb = xxMerge(ha, v1a), xxMerge(hb, v1b)
	m2, m3, m4 := xxRound(0, v2), xxRound(0, v3), xxRound(0, v4)
	ha, hb = (ha^m2)*xxPrime1+xxPrime4, (hb^m2)*xxPrime1+xxPrime4
	ha, hb = (ha^m3)*xxPrime1+xxPrime4, (hb^m3)*xxPrime1+xxPrime4
	ha, hb = (ha^m4)*xxPrime1+xxPrime4, (hb^m4)*xxPrime1+xxPrime4
	ha += uint64(n)
	hb += uint64(n)
	for ; len(p) >= 8; p = p[8:] {
		k := xxRound(0, le.Uint64(p))
		ha = bits.RotateLeft64(ha^k, 27)*xxPrime1 + xxPrime4
		hb = bits.RotateLeft64(hb^k, 27)*xxPrime1 + xxPrime4
	}
	if len(p) >= 4 {
		k := uint64(le.Uint32(p)) * xxPrime1
		ha = bits.RotateLeft64(ha^k, 23)*xxPrime2 + xxPrime3
		hb = bits.RotateLeft64(hb^k, 23)*xxPrime2 + xxPrime3
		p = p[4:]
	}
	for _, c := range p {
		k := uint64(c) * xxPrime5
		ha = bits.RotateLeft64(ha^k, 11) * xxPrime1
		hb = bits.RotateLeft64(hb^k, 11) * xxPrime1
	}
	return xxAvalanche(ha), xxAvalanche(hb)
}

func xxRound(acc, input uint64) uint64 {
	acc += input * xxPrime2
	acc = bits.RotateLeft64(acc, 31)
	return acc * xxPrime1
}

func xxMerge(acc, val uint64) uint64 {
	acc ^= xxRound(0, val)
	return acc*xxPrime1 + xxPrime4
}

func xxAvalanche(h uint64) uint64 {
	h ^= h >> 33
	h *= xxPrime2
	h ^= h >> 29
	h *= xxPrime3
	h ^= h >> 32
	return h
}
