package plugins

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tetratelabs/wazero/api"
)

// Bounds of one spangle_partition_batch call: PartitionBatch splits larger
// batches, so that a call stays short and its buffers small.
const (
	batchMaxKeys  = 4096
	batchMaxBytes = 1 << 20 // key bytes, lengths and results
)

// WasmPartitioner is a Partitioner implemented by a Wasm module (ABI
// spangle/v1, see ABI.md). Safe for concurrent use: calls run on a pool of
// at most Config.PoolSize instances.
type WasmPartitioner struct {
	h *host
}

var _ Partitioner = (*WasmPartitioner)(nil)

// OpenPartitioner loads the partitioner module at path: it reads and checks
// it (imports, exports), compiles it (or loads it from Config.CacheDir) and
// starts one instance, all bounded by ctx. The caller closes it with Close.
func OpenPartitioner(ctx context.Context, path string, cfg Config) (*WasmPartitioner, error) {
	h, err := loadHost(ctx, path, cfg, fnPartition)
	if err != nil {
		return nil, err
	}
	return &WasmPartitioner{h: h}, nil
}

// Identity returns "wasm:sha256:<hex>", the SHA-256 of the module bytes.
func (p *WasmPartitioner) Identity() string { return p.h.identity }

// Batched reports whether the module exports spangle_partition_batch;
// PartitionBatch works either way.
func (p *WasmPartitioner) Batched() bool { return p.h.exported[fnBatch] }

// Partition returns the key's partition in [0, n), twice (a plugin has no
// alternate partition). It blocks while PoolSize calls are running. A plugin
// fault, or a result out of [0, n), is an error (see errors.go); so is n out
// of [1, MaxInt32].
func (p *WasmPartitioner) Partition(key []byte, n int) (int, int, error) {
	if err := p.checkN(n); err != nil {
		return 0, 0, err
	}
	in, err := p.h.acquire(context.Background())
	if err != nil {
		return 0, 0, err
	}
	part, err := in.partition(key, n)
	p.h.release(in)
	return part, part, err
}

// PrefixPartition returns the partition in [0, n) of every key that
// starts with prefix, and true, when the module exports
// spangle_prefix_partition and it says so (ABI.md); false when it returns
// -1 (keys with that prefix may be placed apart) or the module lacks the
// export. A key listing of that prefix then reads one partition. Errors
// as Partition's.
func (p *WasmPartitioner) PrefixPartition(prefix []byte, n int) (int, bool, error) {
	if !p.h.exported[fnPrefix] {
		return 0, false, nil
	}
	if err := p.checkN(n); err != nil {
		return 0, false, err
	}
	in, err := p.h.acquire(context.Background())
	if err != nil {
		return 0, false, err
	}
	defer p.h.release(in)
	ptr, err := in.write(prefix)
	if err != nil {
		return 0, false, err
	}
	s := in.stack
	s[0], s[1], s[2] = api.EncodeU32(ptr), api.EncodeU32(uint32(len(prefix))), api.EncodeI32(int32(n))
	if err := in.call(context.Background(), fnPrefix); err != nil {
		return 0, false, err
	}
	switch r := api.DecodeI32(s[0]); {
	case r == -1:
		return 0, false, nil
	case r < 0:
		return 0, false, in.guestError(fnPrefix, int64(r))
	case int(r) >= n:
		return 0, false, in.badResult(fnPrefix, "returned partition %d, want [0, %d) or -1", r, n)
	default:
		return int(r), true, nil
	}
}

// PartitionBatch sets out[i] to the partition of keys[i] in [0, n), with
// spangle_partition_batch when the module exports it (in calls of at most
// 4096 keys), else a call per key. out must be at least as long as keys.
// On error, out holds no useful result. It holds one instance throughout.
func (p *WasmPartitioner) PartitionBatch(keys [][]byte, n int, out []int) error {
	if err := p.checkN(n); err != nil {
		return err
	}
	if len(out) < len(keys) {
		return fmt.Errorf("plugins: PartitionBatch: %d results for %d keys", len(out), len(keys))
	}
	if len(keys) == 0 {
		return nil
	}
	in, err := p.h.acquire(context.Background())
	if err != nil {
		return err
	}
	defer p.h.release(in)
	if in.fns[fnBatch] == nil {
		for i, k := range keys {
			if out[i], err = in.partition(k, n); err != nil {
				return err
			}
		}
		return nil
	}
	for len(keys) > 0 {
		c, size := 0, 0
		for c < len(keys) && c < batchMaxKeys {
			s := size + len(keys[c]) + 8
			if c > 0 && s > batchMaxBytes {
				break
			}
			c, size = c+1, s
		}
		if err := in.partitionBatch(keys[:c], n, out[:c], size); err != nil {
			return err
		}
		keys, out = keys[c:], out[c:]
	}
	return nil
}

// Close releases the module: see host.close. Idempotent; calls after it
// return ErrClosed.
func (p *WasmPartitioner) Close(ctx context.Context) error { return p.h.close(ctx) }

func (p *WasmPartitioner) checkN(n int) error {
	if n <= 0 || n > math.MaxInt32 {
		return fmt.Errorf("plugins: %s: partition count %d out of [1, %d]", p.h.path, n, math.MaxInt32)
	}
	return nil
}

// partition calls spangle_partition(key_ptr, key_len, n).
func (in *instance) partition(key []byte, n int) (int, error) {
	ptr, err := in.write(key)
	if err != nil {
		return 0, err
	}
	s := in.stack
	s[0], s[1], s[2] = api.EncodeU32(ptr), api.EncodeU32(uint32(len(key))), api.EncodeI32(int32(n))
	if err := in.call(context.Background(), fnPartition); err != nil {
		return 0, err
	}
	switch r := api.DecodeI32(s[0]); {
	case r < 0:
		return 0, in.guestError(fnPartition, int64(r))
	case int(r) >= n:
		return 0, in.badResult(fnPartition, "returned partition %d, want [0, %d)", r, n)
	default:
		return int(r), nil
	}
}

// partitionBatch calls spangle_partition_batch(keys_ptr, lens_ptr, count,
// n, out_ptr) once. The scratch buffer holds the lengths (u32 LE), then the
// results (i32 LE), then the keys back to back. size is their total.
func (in *instance) partitionBatch(keys [][]byte, n int, out []int, size int) error {
	c := uint32(len(keys))
	ptr, err := in.scratch(size)
	if err != nil {
		return err
	}
	view, ok := in.mem.Read(ptr, uint32(size))
	if !ok { // cannot happen: scratch checked it, memory never shrinks
		return in.badResult(fnAlloc, "buffer %#x+%d out of memory", ptr, size)
	}
	off := 8 * c
	for i, k := range keys {
		binary.LittleEndian.PutUint32(view[4*i:], uint32(len(k)))
		off += uint32(copy(view[off:], k))
	}
	s := in.stack
	s[0], s[1], s[2], s[3], s[4] = api.EncodeU32(ptr+8*c), api.EncodeU32(ptr), api.EncodeU32(c), api.EncodeI32(int32(n)), api.EncodeU32(ptr+4*c)
	if err := in.call(context.Background(), fnBatch); err != nil {
		return err
	}
	if status := api.DecodeI32(s[0]); status < 0 {
		return in.guestError(fnBatch, int64(status))
	} else if status > 0 {
		return in.badResult(fnBatch, "returned status %d, want 0 or negative", status)
	}
	// Read again: the guest may have grown (and so moved) its memory.
	res, ok := in.mem.Read(ptr+4*c, 4*c)
	if !ok {
		return in.badResult(fnBatch, "results %#x+%d out of memory", ptr+4*c, 4*c)
	}
	for i := range out {
		r := int32(binary.LittleEndian.Uint32(res[4*i:]))
		if r < 0 || int(r) >= n {
			return in.badResult(fnBatch, "returned partition %d for key %d, want [0, %d)", r, i, n)
		}
		out[i] = int(r)
	}
	return nil
}
