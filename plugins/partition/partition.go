// Package partition holds the built-in key partitioning functions: pure
// functions of the key bytes and the partition count, with no state; the
// Partitioner interface every partitioner implements; and Builtin, which
// returns the built-ins behind it.
//
// It imports nothing of spangle's and no Wasm runtime: the Go client
// (edge/client) routes keys with it, and pays for wazero only when its
// caller loads a Wasm partitioner with plugins.OpenPartitioner.
//
// Every function here takes n > 0; callers check n (a version with zero
// partitions has no keys to route).
package partition

import (
	"math"

	"github.com/twmb/murmur3"
)

// SequinsHash is sequins' key hash: h = 31*h + b over the key bytes, each byte
// taken as unsigned, in wrapping int32 arithmetic. It equals Java's
// String.hashCode only for ASCII keys.
func SequinsHash(key []byte) int32 {
	var h int32
	for _, b := range key {
		h = 31*h + int32(b)
	}
	return h
}

// Sequins returns the key's partition and its alternate partition as sequins
// computes them. The alternate differs from p only for "pathological" keys
// whose hash lies within 32 of MaxInt32: data written by Cascading/Scalding
// hashes a one-field tuple as 31 + String.hashCode, which wraps for those keys
// and lands them in a different file.
func Sequins(key []byte, n int) (p, alt int) {
	h := SequinsHash(key)
	p = int(h&math.MaxInt32) % n
	if h > math.MaxInt32-32 {
		t := int((h+31)&math.MaxInt32) % n // h+31 wraps in int32
		return p, (t + (n - 31%n)) % n
	}
	return p, p
}

// Hadoop returns the partition Hadoop's default HashPartitioner gives a Text
// or BytesWritable key: WritableComparator.hashBytes (start 1, signed bytes),
// then (hash & MaxInt32) % n.
func Hadoop(key []byte, n int) int {
	h := int32(1)
	for _, b := range key {
		h = 31*h + int32(int8(b))
	}
	return int(h&math.MaxInt32) % n
}

// Murmur3 returns the 32-bit murmur3 hash of the key (seed 0), taken as an
// unsigned integer, modulo n.
func Murmur3(key []byte, n int) int {
	return int(murmur3.Sum32(key) % uint32(n))
}
