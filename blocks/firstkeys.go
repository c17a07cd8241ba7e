package blocks

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"runtime/debug"
	"sync/atomic"
	"unsafe"

	bolt "go.etcd.io/bbolt"
)

// blockIndex is an s2-blocks partition's blocks by first key, held in
// memory so that a Get finds its block by a binary search instead of
// bbolt's walk down the tree (1.3 µs of a uniform GET's 5.2 µs lookup in
// the profile of docs/PERFORMANCE.md), and reads the block's bytes
// straight from bbolt's memory map: no read transaction, no cursor.
//
// It is built when the partition is opened, by one walk of the data
// bucket. The file is opened read-only and never written, so bbolt maps it
// once and never remaps it: the offsets stay valid until the bbolt file
// is closed, which Version.Close does only once no Get holds the
// version's read lock. Flat arrays, no Go pointers per block: 24 bytes
// a block besides its first key (size).
type blockIndex struct {
	common  []byte         // the prefix every block's first key shares
	pre     []uint64       // prefix8 of block i's first key past common
	keys    []byte         // the blocks' first keys, end to end, in key order
	keyOffs []uint32       // block i's first key is keys[keyOffs[i]:keyOffs[i+1]]
	offs    []uint64       // block i's stored bytes start at offs[i] in the file
	lens    []uint32       // and are lens[i] long
	base    unsafe.Pointer // the file's first byte in the memory map
	mem     []byte         // the arrays above, outside the Go heap (place)
	mapped  bool           // mem is mapped, not on the heap: free unmaps it
	// checked has bit i set once block i's CRC matched its bytes: a
	// block's CRC is checked on its first read only (see get).
	checked []atomic.Uint64
}

// buildBlockIndex walks the data bucket of db, a partition of
// CompressionS2Blocks, and returns its index; nil when the walk meets
// anything it does not expect (a damaged page, a fault on a file cut
// short, keys out of order, a value outside the file): the partition is
// then read through bbolt as before the index, where such damage is
// ErrCorrupt at the Get that meets it.
func buildBlockIndex(db *bolt.DB) (x *blockIndex) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if recover() != nil {
			x = nil
		}
	}()
	data := db.Info().Data
	x = &blockIndex{keyOffs: []uint32{0}}
	var size uintptr
	err := db.View(func(tx *bolt.Tx) error {
		size = uintptr(tx.Size())
		b := tx.Bucket(dataBucket)
		if b == nil {
			return errBadValue
		}
		c := b.Cursor()
		var prev []byte
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if len(v) == 0 || len(k) == 0 || (prev != nil && bytes.Compare(prev, k) >= 0) {
				return errBadValue // a nested bucket, an empty block, keys out of order
			}
			start := uintptr(unsafe.Pointer(unsafe.SliceData(v)))
			if start < data || start-data > size || uintptr(len(v)) > size-(start-data) {
				return errBadValue
			}
			if x.base == nil {
				// The file's first byte, reached from a pointer into its
				// mapping.
				x.base = unsafe.Add(unsafe.Pointer(unsafe.SliceData(v)), -int(start-data))
			}
			if len(x.keys)+len(k) > math.MaxUint32 {
				return errBadValue
			}
			x.keys = append(x.keys, k...)
			x.keyOffs = append(x.keyOffs, uint32(len(x.keys)))
			x.offs = append(x.offs, uint64(start-data))
			x.lens = append(x.lens, uint32(len(v)))
			prev = k
		}
		return nil
	})
	if x.base != nil {
		unmapPages(unsafe.Slice((*byte)(x.base), size))
	}
	if err != nil {
		return nil
	}
	x.place()
	return x
}

// place moves the index, built on the heap by the walk, into one region
// of memory outside it (allocIndex, freed by free): live heap counts
// about three times in the RSS (the collector lets the heap grow to 1 +
// gc_percent/100 times the live heap before it collects), and the
// collector would scan it. With the index on the heap, spangle-bench's
// serving RssAnon grew by 7.5 MiB for an index of 2.1 MB.
func (x *blockIndex) place() {
	n := len(x.lens)
	common := 0
	if n > 0 {
		a, b := x.first(0), x.first(n-1) // the keys between share what these two do
		for common < len(a) && common < len(b) && a[common] == b[common] {
			common++
		}
	}
	words := (n + 63) / 64
	// The 8-byte arrays first, so that each is aligned.
	total := 8*n + 8*n + 8*words + 4*(n+1) + 4*n + len(x.keys) + common
	mem, mapped := allocIndex(total)
	at := unsafe.Pointer(unsafe.SliceData(mem))
	take := func(bytes int) unsafe.Pointer {
		p := at
		at = unsafe.Add(at, bytes)
		return p
	}
	pre := unsafe.Slice((*uint64)(take(8*n)), n)
	offs := unsafe.Slice((*uint64)(take(8*n)), n)
	checked := unsafe.Slice((*atomic.Uint64)(take(8*words)), words)
	keyOffs := unsafe.Slice((*uint32)(take(4*(n+1))), n+1)
	lens := unsafe.Slice((*uint32)(take(4*n)), n)
	keys := unsafe.Slice((*byte)(take(len(x.keys))), len(x.keys))
	copy(offs, x.offs)
	copy(keyOffs, x.keyOffs)
	copy(lens, x.lens)
	copy(keys, x.keys)
	x.common = unsafe.Slice((*byte)(take(common)), common)
	copy(x.common, x.keys[:common]) // block 0's first key starts the keys
	x.mem, x.mapped, x.offs, x.keyOffs, x.lens, x.keys, x.checked, x.pre = mem, mapped, offs, keyOffs, lens, keys, checked, pre
	for i := range pre {
		pre[i] = prefix8(x.first(i)[common:])
	}
}

// free releases the index's memory: called once no Get can use the
// index (partition.close, under the Version's lock). Its fields stay, so
// that IndexBytes may still read its size.
func (x *blockIndex) free() {
	if x != nil && x.mapped {
		x.mapped = false
		freeIndex(x.mem)
	}
}

// heapIndex returns n bytes of zeroed memory on the heap, 8-byte aligned.
func heapIndex(n int) []byte {
	w := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), n)
}

// find returns the block holding key, if any: the last one whose first
// key is not after key; -1 when key is before the first block. It
// compares the 8 bytes of the keys past the prefix all first keys share
// (the bench's keys, hex record numbers, share their first 10) as
// integers, read from one array, and the keys' rest only where those
// are equal, so that fewer of the search's probes miss the CPU's
// caches.
func (x *blockIndex) find(key []byte) int {
	c := x.common
	if len(key) < len(c) || !bytes.Equal(key[:len(c)], c) {
		if bytes.Compare(key, c) < 0 {
			return -1 // before every first key
		}
		return len(x.pre) - 1 // after every first key
	}
	rest := key[len(c):]
	kp := prefix8(rest)
	lo, hi := 0, len(x.pre)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		// A smaller prefix is a smaller key, a larger one a larger key.
		if p := x.pre[m]; p < kp || p == kp && bytes.Compare(x.first(m)[len(c):], rest) <= 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo - 1
}

// prefix8 is k's first 8 bytes as a big-endian integer, zeros past its
// end: keys in order have prefixes in order (equal ones too).
func prefix8(k []byte) uint64 {
	if len(k) >= 8 {
		return binary.BigEndian.Uint64(k)
	}
	var b [8]byte
	copy(b[:], k)
	return binary.BigEndian.Uint64(b[:])
}

// first is block i's first key.
func (x *blockIndex) first(i int) []byte { return x.keys[x.keyOffs[i]:x.keyOffs[i+1]] }

// block is block i's stored bytes, in the file's memory map.
func (x *blockIndex) block(i int) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(x.base, int(x.offs[i]))), x.lens[i])
}

// size is the index's memory in bytes.
func (x *blockIndex) size() int64 {
	if x == nil {
		return 0
	}
	return int64(len(x.mem))
}

// get appends to dst the value of key, found through the index.
//
// A block's CRC is checked on its first read after the partition opened,
// not on every Get (0.5 µs of a uniform GET's CPU in the profile of
// docs/PERFORMANCE.md): the file is never written, and its checksum was
// checked when it opened (unless Options.SkipVerify), so what the CRC
// still catches is damage the open check missed, on the block's first
// read. A block that rots on disk after its first read is not caught
// until the version is opened again; `spangle verify` checks every
// block.
func (x *blockIndex) get(dst, key []byte, blockMax, limit int) ([]byte, error) {
	i := x.find(key)
	if i < 0 {
		return dst, ErrNotFound
	}
	checked := x.isChecked(i)
	out, err := findInBlockCRC(dst, x.block(i), x.first(i), key, blockMax, limit, !checked)
	if !checked && !errors.Is(err, ErrCorrupt) {
		x.setChecked(i) // its CRC matched: every other outcome comes after the check
	}
	return out, err
}

// isChecked reports whether block i's CRC was found to match.
func (x *blockIndex) isChecked(i int) bool { return x.checked[i>>6].Load()&(1<<(i&63)) != 0 }

// setChecked records that block i's CRC matched.
func (x *blockIndex) setChecked(i int) { x.checked[i>>6].Or(1 << (i & 63)) }
