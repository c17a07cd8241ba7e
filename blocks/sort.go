package blocks

import (
	"bytes"
	"cmp"
	"container/heap"
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
)

// seqOf packs a record's position in the input, (file index, record index
// in the file), into one number ordering records as files in name order,
// then records in file order. The last record of a key in this order wins.
func seqOf(file uint32, rec uint64) uint64 { return uint64(file)<<recordBits | rec }

// recordBits bounds the records of a file (2^40) and so the number of files
// (2^24).
const (
	recordBits = 40
	maxFiles   = 1 << (64 - recordBits)
	maxRecords = 1 << recordBits
)

// entry indexes one record of a sortedRecs.
type entry struct {
	prefix uint64 // the 8 key bytes after sortedRecs.skip, big-endian, zero-padded
	seq    uint64
	ref    uint64 // chunk index << 32 | offset of the record's key length
}

// sortedRecs is the records of some chunks, sorted by key, one per key.
type sortedRecs struct {
	chunks  []*chunk
	entries []entry
	skip    int // bytes every key starts with alike; entry prefixes follow them
	// conflict is a key found both upserted and deleted (a delta's
	// records of files from delFrom on are deletions), nil if none.
	conflict []byte
}

// isDeletion reports whether a record of sequence seq is a deletion: one
// read from a file at index delFrom or beyond (a delta build's _DELETES).
func isDeletion(seq uint64, delFrom uint32) bool { return seq>>recordBits >= uint64(delFrom) }

// conflictError is a delta's key both upserted and deleted.
func conflictError(k []byte) error {
	return fmt.Errorf("%w: key %q is both upserted and deleted by the delta", ErrBadInput, k[:min(len(k), 64)])
}

// commonPrefixLen returns the length of the prefix all keys of chunks
// share, in one sequential pass.
func commonPrefixLen(chunks []*chunk) int {
	var first []byte
	l := -1
	for _, c := range chunks {
		buf := c.buf
		for off := 0; off < len(buf) && l != 0; {
			_, n1 := uvarint(buf[off:])
			off += n1
			klen, n2 := uvarint(buf[off:])
			off += n2
			vlen, n3 := uvarint(buf[off:])
			off += n3
			k := buf[off : off+int(klen)]
			off += int(klen) + int(vlen)
			if l < 0 {
				first, l = k, len(k)
				continue
			}
			m := min(l, len(k))
			i := 0
			for i < m && k[i] == first[i] {
				i++
			}
			l = i
		}
	}
	return max(l, 0)
}

func uvarint(b []byte) (uint64, int) {
	if len(b) > 0 && b[0] < 0x80 {
		return uint64(b[0]), 1
	}
	return binary.Uvarint(b)
}

func keyPrefix(k []byte) uint64 {
	if len(k) >= 8 {
		return binary.BigEndian.Uint64(k)
	}
	var b [8]byte
	copy(b[:], k)
	return binary.BigEndian.Uint64(b[:])
}

// sortChunks indexes the records of chunks, sorts them by key then
// sequence, and keeps the last record of each key. Chunks are taken in
// input order (file, then record), so that input already in key order
// (Sparkey logs, sorted job output) is found sorted in one pass and not
// sorted again. Records of files from delFrom on are deletions: a key
// also upserted is recorded in conflict.
func sortChunks(chunks []*chunk, delFrom uint32) *sortedRecs {
	slices.SortFunc(chunks, func(a, b *chunk) int {
		if c := cmp.Compare(a.file, b.file); c != 0 {
			return c
		}
		ra, _ := uvarint(a.buf)
		rb, _ := uvarint(b.buf)
		return cmp.Compare(ra, rb)
	})
	n := 0
	for _, c := range chunks {
		n += c.n
	}
	s := &sortedRecs{chunks: chunks, entries: make([]entry, 0, n)}
	// Keys often share a long prefix ("user:0000…"): index the 8 bytes
	// after the prefix all keys share, so that the radix pass and most
	// comparisons see bytes that differ.
	s.skip = commonPrefixLen(chunks)
	for ci, c := range chunks {
		buf := c.buf
		for off := 0; off < len(buf); {
			rec, n1 := uvarint(buf[off:])
			ref := uint64(ci)<<32 | uint64(off+n1)
			off += n1
			klen, n2 := uvarint(buf[off:])
			off += n2
			vlen, n3 := uvarint(buf[off:])
			off += n3
			k := buf[off : off+int(klen)]
			off += int(klen) + int(vlen)
			s.entries = append(s.entries, entry{prefix: keyPrefix(k[s.skip:]), seq: seqOf(c.file, rec), ref: ref})
		}
	}
	s.sort()
	// Keep the last of equal keys: the greatest sequence.
	out := s.entries[:0]
	for i, e := range s.entries {
		if i+1 < len(s.entries) && s.entries[i+1].prefix == e.prefix && bytes.Equal(s.key(s.entries[i+1]), s.key(e)) {
			if s.conflict == nil && isDeletion(e.seq, delFrom) != isDeletion(s.entries[i+1].seq, delFrom) {
				s.conflict = bytes.Clone(s.key(e))
			}
			continue
		}
		out = append(out, e)
	}
	s.entries = out
	return s
}

// radixBits is the number of key bits of the first sorting pass: 16,384
// buckets leave a few entries each in a partition of 125,000 random keys.
// BenchmarkBuild (1M records): 3-5 % faster than 11 bits, and 16 bits
// slower again (its counts outgrow the caches).
const radixBits = 14

// sort sorts the entries by key, then sequence: one counting-sort pass on
// the first radixBits bits where the keys' prefixes differ, then pdqsort of
// each bucket. With random keys the buckets are small and most comparisons
// are of prefixes only; keys sharing a prefix are bucketed on the bits
// after it.
func (s *sortedRecs) sort() {
	es := s.entries
	if s.sorted() {
		return
	}
	if len(es) < 1<<radixBits {
		slices.SortFunc(es, s.compare)
		return
	}
	lo, hi := es[0].prefix, es[0].prefix
	for _, e := range es {
		lo = min(lo, e.prefix)
		hi = max(hi, e.prefix)
	}
	shift := 64 - bits.LeadingZeros64(lo^hi) - radixBits
	if lo == hi {
		slices.SortFunc(es, s.compare)
		return
	}
	shift = max(shift, 0)
	counts := make([]int, 1<<radixBits+1) // too large for the stack
	for _, e := range es {
		counts[((e.prefix-lo)>>shift)&(1<<radixBits-1)+1]++
	}
	for i := 1; i < len(counts); i++ {
		counts[i] += counts[i-1]
	}
	starts := slices.Clone(counts) // counts keeps the bucket bounds
	out := make([]entry, len(es))
	for _, e := range es {
		b := ((e.prefix - lo) >> shift) & (1<<radixBits - 1)
		out[starts[b]] = e
		starts[b]++
	}
	for b := range 1 << radixBits {
		if bucket := out[counts[b]:counts[b+1]]; len(bucket) > 1 {
			slices.SortFunc(bucket, s.compare)
		}
	}
	s.entries = out
}

// sorted reports whether the entries are in order already.
func (s *sortedRecs) sorted() bool {
	es := s.entries
	for i := 1; i < len(es); i++ {
		if es[i-1].prefix > es[i].prefix || (es[i-1].prefix == es[i].prefix && s.compare(es[i-1], es[i]) > 0) {
			return false
		}
	}
	return true
}

func (s *sortedRecs) compare(a, b entry) int {
	if a.prefix != b.prefix {
		return cmp.Compare(a.prefix, b.prefix)
	}
	if c := bytes.Compare(s.key(a), s.key(b)); c != 0 {
		return c
	}
	return cmp.Compare(a.seq, b.seq)
}

func (s *sortedRecs) key(e entry) []byte {
	buf := s.chunks[e.ref>>32].buf[uint32(e.ref):]
	klen, n1 := uvarint(buf)
	_, n2 := uvarint(buf[n1:])
	return buf[n1+n2 : n1+n2+int(klen)]
}

func (s *sortedRecs) kv(e entry) (k, v []byte) {
	buf := s.chunks[e.ref>>32].buf[uint32(e.ref):]
	klen, n1 := uvarint(buf)
	vlen, n2 := uvarint(buf[n1:])
	start := n1 + n2
	return buf[start : start+int(klen)], buf[start+int(klen) : start+int(klen)+int(vlen)]
}

// sample appends up to want values spread evenly over the records to dst,
// at most maxBytes in all, each truncated to dictSampleMaxLen, copied.
func (s *sortedRecs) sample(dst [][]byte, size *int, want, maxBytes int) [][]byte {
	if want <= 0 || len(s.entries) == 0 {
		return dst
	}
	step := max(len(s.entries)/want, 1)
	for i := 0; i < len(s.entries) && want > 0 && *size < maxBytes; i += step {
		_, v := s.kv(s.entries[i])
		if len(v) == 0 {
			continue
		}
		v = v[:min(len(v), dictSampleMaxLen, maxBytes-*size)]
		dst = append(dst, bytes.Clone(v))
		*size += len(v)
		want--
	}
	return dst
}

// recordIter iterates over records in key order, one per key. key and
// value are valid until the next call to next.
type recordIter interface {
	next() bool
	key() []byte
	value() []byte
	seq() uint64
	err() error
}

// memIter iterates over a sortedRecs. Records are decoded a batch at a
// time: in sorted order each one is a cache miss at a random place, and a
// short loop over a batch lets the CPU overlap the misses.
type memIter struct {
	s     *sortedRecs
	i     int // next entry to decode
	batch [64]kvRef
	n, j  int // decoded in batch, next in batch
	touch byte
}

type kvRef struct {
	k, v []byte
	seq  uint64
}

func (it *memIter) next() bool {
	if it.j+1 < it.n {
		it.j++
		return true
	}
	es := it.s.entries[it.i:min(it.i+len(it.batch), len(it.s.entries))]
	if len(es) == 0 {
		return false
	}
	var touch byte
	for j, e := range es {
		k, v := it.s.kv(e)
		it.batch[j] = kvRef{k, v, e.seq}
		if len(v) > 0 {
			touch += v[len(v)/2] + v[len(v)-1] // start loading the value's cache lines too
		}
	}
	it.touch += touch
	it.i += len(es)
	it.n, it.j = len(es), 0
	return true
}

func (it *memIter) key() []byte   { return it.batch[it.j].k }
func (it *memIter) value() []byte { return it.batch[it.j].v }
func (it *memIter) seq() uint64   { return it.batch[it.j].seq }
func (it *memIter) err() error    { return nil }

// mergeIter merges iterators (each sorted, one record per key) into one,
// keeping for each key the record of greatest sequence.
type mergeIter struct {
	h       iterHeap
	cur     recordIter // the iterator positioned on the current record
	failed  error
	delFrom uint32 // see sortChunks
}

func newMergeIter(its []recordIter, delFrom uint32) *mergeIter {
	m := &mergeIter{delFrom: delFrom}
	for _, it := range its {
		m.push(it)
	}
	return m
}

// push advances it and puts it back in the heap unless it is exhausted.
func (m *mergeIter) push(it recordIter) {
	if it.next() {
		heap.Push(&m.h, it)
	} else if err := it.err(); err != nil && m.failed == nil {
		m.failed = err
	}
}

func (m *mergeIter) next() bool {
	if m.cur != nil {
		m.push(m.cur)
		m.cur = nil
	}
	if m.failed != nil || len(m.h) == 0 {
		return false
	}
	it := heap.Pop(&m.h).(recordIter)
	// Equal keys pop in sequence order: the later one wins.
	for len(m.h) > 0 && bytes.Equal(m.h[0].key(), it.key()) {
		if m.failed == nil && isDeletion(it.seq(), m.delFrom) != isDeletion(m.h[0].seq(), m.delFrom) {
			m.failed = conflictError(it.key())
		}
		m.push(it)
		it = heap.Pop(&m.h).(recordIter)
	}
	if m.failed != nil {
		return false
	}
	m.cur = it
	return true
}

func (m *mergeIter) key() []byte   { return m.cur.key() }
func (m *mergeIter) value() []byte { return m.cur.value() }
func (m *mergeIter) seq() uint64   { return m.cur.seq() }
func (m *mergeIter) err() error    { return m.failed }

// iterHeap orders iterators by current key, then sequence.
type iterHeap []recordIter

func (h iterHeap) Len() int { return len(h) }
func (h iterHeap) Less(i, j int) bool {
	if c := bytes.Compare(h[i].key(), h[j].key()); c != 0 {
		return c < 0
	}
	return h[i].seq() < h[j].seq()
}
func (h iterHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *iterHeap) Push(x any)   { *h = append(*h, x.(recordIter)) }
func (h *iterHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return it
}
