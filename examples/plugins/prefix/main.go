//go:build wasip1

// Command prefix is a spangle partitioner plugin that keeps together the
// keys that share a prefix: a key's partition depends only on the bytes
// before its first ':' (the whole key when it has none). "user42:profile"
// and "user42:orders" land in one partition, so a batch job that writes a
// user's records together, or a client that reads them together, touches
// one node. The prefix is hashed with 32-bit FNV-1a, modulo the partition
// count.
//
// Build it as a WASI reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -trimpath -buildmode=c-shared -o prefix.wasm ./examples/plugins/prefix
package main

//lint:file-ignore U1000 the host calls the go:wasmexport functions, which staticcheck cannot see

import (
	"bytes"
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

//go:wasmexport spangle_partition
func partitionKey(key *byte, keyLen uint32, n int32) int32 {
	if n <= 0 {
		return -1
	}
	return place(unsafe.Slice(key, keyLen), n)
}

//go:wasmexport spangle_partition_batch
func partitionBatch(keys *byte, lens *uint32, count uint32, n int32, out *int32) int32 {
	if n <= 0 {
		return -1
	}
	res := unsafe.Slice(out, count)
	key := unsafe.Pointer(keys)
	for i, l := range unsafe.Slice(lens, count) {
		res[i] = place(unsafe.Slice((*byte)(key), l), n)
		key = unsafe.Add(key, l)
	}
	return 0
}

// prefixPartition tells the host that the keys starting with prefix share
// one partition when the prefix holds a ':' (their placement depends only
// on the bytes before it), so that a key listing of that prefix reads one
// partition; -1 when they may be placed apart.
//
//go:wasmexport spangle_prefix_partition
func prefixPartition(prefix *byte, prefixLen uint32, n int32) int32 {
	if n <= 0 {
		return -2
	}
	p := unsafe.Slice(prefix, prefixLen)
	if bytes.IndexByte(p, ':') < 0 {
		return -1
	}
	return place(p, n)
}

// place returns the partition of key among n: FNV-1a of its prefix.
func place(key []byte, n int32) int32 {
	if i := bytes.IndexByte(key, ':'); i >= 0 {
		key = key[:i]
	}
	h := uint32(2166136261)
	for _, c := range key {
		h ^= uint32(c)
		h *= 16777619
	}
	return int32(h % uint32(n))
}
