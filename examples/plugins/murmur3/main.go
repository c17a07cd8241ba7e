//go:build wasip1

// Command murmur3 is a spangle partitioner plugin that places every key
// where the built-in "murmur3" partitioner does: the 32-bit murmur3 hash of
// the key (seed 0), unsigned, modulo the partition count. It shows the
// spangle/v1 ABI from Go (see plugins/ABI.md). Build it as a WASI reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -trimpath -buildmode=c-shared -o murmur3.wasm ./examples/plugins/murmur3
package main

//lint:file-ignore U1000 the host calls the go:wasmexport functions, which staticcheck cannot see

import (
	"math/bits"
	"unsafe"
)

// main is never called: a reactor's exports are called after _initialize.
func main() {}

// live holds the buffers lent to the host, which the garbage collector
// cannot see, until spangle_free.
var live = map[*byte][]byte{}

//go:wasmexport spangle_alloc
func alloc(size uint32) *byte {
	b := make([]byte, max(size, 1))
	live[&b[0]] = b
	return &b[0]
}

//go:wasmexport spangle_free
func free(p *byte, size uint32) { delete(live, p) }

// partitionKey returns the key's partition in [0, n), or -1 for n <= 0.
//
//go:wasmexport spangle_partition
func partitionKey(key *byte, keyLen uint32, n int32) int32 {
	if n <= 0 {
		return -1
	}
	return int32(sum32(unsafe.Pointer(key), keyLen) % uint32(n))
}

// partitionBatch partitions count keys stored back to back from keys, with
// their lengths (u32) at lens, into out (i32).
//
//go:wasmexport spangle_partition_batch
func partitionBatch(keys *byte, lens *uint32, count uint32, n int32, out *int32) int32 {
	if n <= 0 {
		return -1
	}
	key := unsafe.Pointer(keys)
	for i, l := range unsafe.Slice(lens, count) {
		*(*int32)(unsafe.Add(unsafe.Pointer(out), 4*i)) = int32(sum32(key, l) % uint32(n))
		key = unsafe.Add(key, l)
	}
	return 0
}

// sum32 is MurmurHash3_x86_32 with seed 0 of the n bytes at p.
//
// It is written for speed under the host's deadline checks: wazero checks
// at every backward jump of the guest, and Go's wasm code jumps backward for
// every taken branch, bounds checks included (about 30 ns each). So it reads
// through a pointer (no bounds checks), takes 16 bytes per loop iteration
// and handles the last 0-15 bytes without a loop: about 300 ns per 16-byte
// key where a bounds-checked, 4-bytes-per-iteration version takes 450 ns.
func sum32(p unsafe.Pointer, n uint32) uint32 {
	var h uint32
	rest := n
	for rest >= 16 {
		h = mix(mix(mix(mix(h, load32(p, 0)), load32(p, 4)), load32(p, 8)), load32(p, 12))
		p = unsafe.Add(p, 16)
		rest -= 16
	}
	switch rest >> 2 {
	case 3:
		h = mix(mix(mix(h, load32(p, 0)), load32(p, 4)), load32(p, 8))
	case 2:
		h = mix(mix(h, load32(p, 0)), load32(p, 4))
	case 1:
		h = mix(h, load32(p, 0))
	}
	if t := rest & 3; t != 0 {
		tail := (*[3]byte)(unsafe.Add(p, rest&^3))
		var k uint32
		switch t {
		case 3:
			k = uint32(tail[2])<<16 | uint32(tail[1])<<8 | uint32(tail[0])
		case 2:
			k = uint32(tail[1])<<8 | uint32(tail[0])
		case 1:
			k = uint32(tail[0])
		}
		h ^= scramble(k)
	}
	h ^= n
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

func scramble(k uint32) uint32 { return bits.RotateLeft32(k*0xcc9e2d51, 15) * 0x1b873593 }

func mix(h, k uint32) uint32 { return bits.RotateLeft32(h^scramble(k), 13)*5 + 0xe6546b64 }

// load32 reads the little-endian uint32 at p+off (Wasm is little-endian).
func load32(p unsafe.Pointer, off uintptr) uint32 { return *(*uint32)(unsafe.Add(p, off)) }
