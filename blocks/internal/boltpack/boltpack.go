// Package boltpack writes a bbolt database file in one sequential pass from
// keys given in increasing order: a bulk loader.
//
// bbolt has no bulk-load API. Even with sorted keys, FillPercent 1.0 and
// transactions of 10k keys, Bucket.Put costs about 1 µs of CPU per key
// (cursor seek, node split and spill at commit). boltpack instead lays out
// the pages of the finished B+tree directly: leaf pages filled completely, in
// key order, then the branch levels above them, then the root bucket page,
// an empty freelist and the two meta pages. The result is an ordinary bbolt
// file (format version 2) that bbolt opens, reads, checks (Tx.Check) and can
// even modify.
//
// The layout is that of a freshly compacted bbolt database:
//
//	page 0, 1   meta pages (txid 0 and 1), root bucket at page 3, freelist at page 2
//	page 2      freelist, empty
//	page 3      root bucket's leaf page: one bucket element per top-level bucket
//	page 4…     each bucket's leaf pages in key order, then its branch pages
//	            level by level, the bucket's root page last
//
// Only top-level buckets holding plain key/values are supported (no nested
// buckets, no sequences). A Writer is not safe for concurrent use.
package boltpack

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"slices"

	"github.com/cespare/xxhash/v2"
)

// Limits, as bbolt enforces them on Put.
const (
	MaxKeySize   = 32768
	MaxValueSize = (1 << 31) - 2
)

// bbolt's on-disk constants (go.etcd.io/bbolt/internal/common).
const (
	magic            = 0xED0CDAED
	formatVersion    = 2
	pageHeaderSize   = 16
	leafElemSize     = 16
	branchElemSize   = 16
	bucketHeaderSize = 16
	metaSize         = 64

	branchPageFlag   = 0x01
	leafPageFlag     = 0x02
	metaPageFlag     = 0x04
	freelistPageFlag = 0x10
	bucketLeafFlag   = 0x01

	freelistPgid = 2
	rootPgid     = 3
	firstPgid    = 4

	maxCount = 0xFFFF // page.count is a uint16
)

var ne = binary.NativeEndian // bbolt maps its structs onto the file

// Errors returned for misuse reachable from input.
var (
	ErrKeyRequired   = errors.New("boltpack: key required")
	ErrKeyTooLarge   = errors.New("boltpack: key too large")
	ErrValueTooLarge = errors.New("boltpack: value too large")
	ErrKeyOrder      = errors.New("boltpack: keys not in strictly increasing order")
	ErrNoBucket      = errors.New("boltpack: no bucket started")
	ErrBucketExists  = errors.New("boltpack: bucket already written")
	ErrFinished      = errors.New("boltpack: writer finished")
)

// Options configure a Writer. The zero value gives the defaults.
type Options struct {
	// PageSize is the bbolt page size. Default os.Getpagesize(), bbolt's
	// own default.
	PageSize int
	// BufferSize is how many bytes of pages are gathered before a write to
	// the file. Default 1 MiB.
	BufferSize int
}

// Writer writes one bbolt file. Keys are put bucket by bucket, each bucket's
// keys in strictly increasing byte order.
type Writer struct {
	f        *os.File
	pageSize int
	next     uint64 // id of the next page to write
	out      []byte // pages waiting to be written; len is a multiple of pageSize
	err      error  // sticky
	finished bool
	// body hashes the pages from firstPgid on as they are written, in
	// file order; headSum is XXH64 of pages 0 to 3, set by Finish.
	body    *xxhash.Digest
	headSum uint64

	buckets []bucketRoot
	cur     *bucketRoot // nil before the first Bucket call

	// The leaf page being filled.
	elems []leafElem
	data  []byte // keys and values of elems, back to back
	last  []byte // the last key put in the current bucket
	nkeys int64  // keys put in the current bucket

	// The pages of the level being built: first key and page id each.
	refKeys []byte
	refs    []pageRef
}

type bucketRoot struct {
	name []byte
	root uint64
}

type leafElem struct{ koff, klen, vlen uint32 }

type pageRef struct {
	koff, klen uint32
	pgid       uint64
}

// Create creates (truncating) the file at path and returns a Writer for it.
func Create(path string, opts Options) (*Writer, error) {
	if opts.PageSize <= 0 {
		opts.PageSize = os.Getpagesize()
	}
	if opts.PageSize < 1024 || opts.PageSize&(opts.PageSize-1) != 0 {
		return nil, fmt.Errorf("boltpack: invalid page size %d", opts.PageSize)
	}
	if opts.BufferSize <= 0 {
		opts.BufferSize = 1 << 20
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	if _, err := f.Seek(firstPgid*int64(opts.PageSize), 0); err != nil {
		_ = f.Close()
		return nil, err
	}
	bufPages := max(opts.BufferSize/opts.PageSize, 1)
	return &Writer{
		f:        f,
		pageSize: opts.PageSize,
		next:     firstPgid,
		out:      make([]byte, 0, bufPages*opts.PageSize),
		body:     xxhash.New(),
		data:     make([]byte, 0, opts.PageSize),
	}, nil
}

// Bucket finishes the current bucket, if any, and starts the top-level
// bucket name. Names must be unique and non-empty.
func (w *Writer) Bucket(name []byte) error {
	if w.err != nil {
		return w.err
	}
	if w.finished {
		return ErrFinished
	}
	if len(name) == 0 {
		return ErrKeyRequired
	}
	if len(name) > MaxKeySize {
		return ErrKeyTooLarge
	}
	for _, b := range w.buckets {
		if bytes.Equal(b.name, name) {
			return fmt.Errorf("%w: %q", ErrBucketExists, name)
		}
	}
	if w.cur != nil {
		if err := w.finishBucket(); err != nil {
			return err
		}
	}
	w.buckets = append(w.buckets, bucketRoot{name: bytes.Clone(name)})
	w.cur = &w.buckets[len(w.buckets)-1]
	w.last = w.last[:0]
	w.nkeys = 0
	return nil
}

// Put adds a key/value to the current bucket. key must sort strictly after
// the previous key of the bucket. Put copies key and value: the caller keeps
// ownership of both.
func (w *Writer) Put(key, value []byte) error {
	if w.err != nil {
		return w.err
	}
	if w.cur == nil {
		return ErrNoBucket
	}
	switch {
	case len(key) == 0:
		return ErrKeyRequired
	case len(key) > MaxKeySize:
		return ErrKeyTooLarge
	case len(value) > MaxValueSize:
		return ErrValueTooLarge
	}
	if w.nkeys > 0 && bytes.Compare(key, w.last) <= 0 {
		return fmt.Errorf("%w: %q after %q", ErrKeyOrder, key, w.last)
	}
	w.last = append(w.last[:0], key...)
	w.nkeys++

	need := leafElemSize + len(key) + len(value)
	if n := len(w.elems); n > 0 && (pageHeaderSize+n*leafElemSize+len(w.data)+need > w.pageSize || n == maxCount) {
		if err := w.flushLeaf(); err != nil {
			return err
		}
	}
	koff := len(w.data)
	w.data = append(w.data, key...)
	w.data = append(w.data, value...)
	w.elems = append(w.elems, leafElem{koff: uint32(koff), klen: uint32(len(key)), vlen: uint32(len(value))})
	return nil
}

// Keys returns how many keys were put in the current bucket.
func (w *Writer) Keys() int64 { return w.nkeys }

// Finish finishes the last bucket and writes the root bucket page, the
// freelist and the meta pages. It does not sync: call Sync, then Close.
func (w *Writer) Finish() error {
	if w.err != nil {
		return w.err
	}
	if w.finished {
		return ErrFinished
	}
	if w.cur != nil {
		if err := w.finishBucket(); err != nil {
			return err
		}
	}
	if err := w.flushOut(); err != nil {
		return w.fail(err)
	}
	w.finished = true
	head, err := w.headPages()
	if err != nil {
		return w.fail(err)
	}
	if _, err := w.f.WriteAt(head, 0); err != nil {
		return w.fail(err)
	}
	w.headSum = xxhash.Sum64(head)
	return nil
}

// Sums returns, once Finish has returned, the file's checksums computed as
// it was written: XXH64 (seed 0) of its first headLen bytes (pages 0 to 3,
// written last) and of the rest (written in file order), so that the file
// need not be read back to be hashed.
func (w *Writer) Sums() (headLen int64, head, body uint64) {
	return firstPgid * int64(w.pageSize), w.headSum, w.body.Sum64()
}

// Size returns the size of the file in bytes, once Finish has returned.
func (w *Writer) Size() int64 { return int64(w.next) * int64(w.pageSize) }

// Sync commits the file's contents to stable storage (fsync).
func (w *Writer) Sync() error { return w.f.Sync() }

// Close closes the file. It does not remove an unfinished file.
func (w *Writer) Close() error { return w.f.Close() }

func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return w.err
}

// finishBucket writes the current bucket's last leaf page and its branch
// levels, and records its root page.
func (w *Writer) finishBucket() error {
	if len(w.elems) > 0 || len(w.refs) == 0 {
		// The last leaf, or the empty leaf page of an empty bucket.
		if err := w.flushLeaf(); err != nil {
			return err
		}
	}
	for len(w.refs) > 1 {
		if err := w.writeBranchLevel(); err != nil {
			return err
		}
	}
	w.cur.root = w.refs[0].pgid
	w.refs = w.refs[:0]
	w.refKeys = w.refKeys[:0]
	w.cur = nil
	return nil
}

// page returns room for a page of size bytes (rounded up to whole pages) in
// the output buffer, zeroed, and the number of extra overflow pages.
func (w *Writer) page(size int) ([]byte, uint32, error) {
	n := max((size+w.pageSize-1)/w.pageSize, 1) * w.pageSize
	if len(w.out)+n > cap(w.out) {
		if err := w.flushOut(); err != nil {
			return nil, 0, w.fail(err)
		}
		if n > cap(w.out) {
			w.out = make([]byte, 0, n)
		}
	}
	p := w.out[len(w.out) : len(w.out)+n]
	clear(p)
	w.out = w.out[:len(w.out)+n]
	return p, uint32(n/w.pageSize - 1), nil
}

func (w *Writer) flushOut() error {
	if len(w.out) == 0 {
		return nil
	}
	_, _ = w.body.Write(w.out)
	_, err := w.f.Write(w.out)
	w.out = w.out[:0]
	return err
}

func putPageHeader(p []byte, id uint64, flags uint16, count int, overflow uint32) {
	ne.PutUint64(p[0:], id)
	ne.PutUint16(p[8:], flags)
	ne.PutUint16(p[10:], uint16(count))
	ne.PutUint32(p[12:], overflow)
}

// flushLeaf writes the pending elements as one leaf page (with overflow
// pages when a single element is larger than a page).
func (w *Writer) flushLeaf() error {
	n := len(w.elems)
	dataStart := pageHeaderSize + n*leafElemSize
	p, overflow, err := w.page(dataStart + len(w.data))
	if err != nil {
		return err
	}
	id := w.next
	putPageHeader(p, id, leafPageFlag, n, overflow)
	for i, e := range w.elems {
		el := p[pageHeaderSize+i*leafElemSize:]
		pos := dataStart + int(e.koff) - (pageHeaderSize + i*leafElemSize)
		ne.PutUint32(el[0:], 0) // flags: a plain value
		ne.PutUint32(el[4:], uint32(pos))
		ne.PutUint32(el[8:], e.klen)
		ne.PutUint32(el[12:], e.vlen)
	}
	copy(p[dataStart:], w.data)
	var first []byte
	if n > 0 {
		first = w.data[w.elems[0].koff : w.elems[0].koff+w.elems[0].klen]
	}
	w.addRef(first, id)
	w.next += uint64(overflow) + 1
	w.elems = w.elems[:0]
	w.data = w.data[:0]
	return nil
}

func (w *Writer) addRef(key []byte, id uint64) {
	w.refs = append(w.refs, pageRef{koff: uint32(len(w.refKeys)), klen: uint32(len(key)), pgid: id})
	w.refKeys = append(w.refKeys, key...)
}

// writeBranchLevel writes branch pages over w.refs and replaces w.refs by
// references to them.
func (w *Writer) writeBranchLevel() error {
	refs, keys := w.refs, w.refKeys
	w.refs, w.refKeys = nil, nil
	for start := 0; start < len(refs); {
		// Take as many references as fit in a page, at least two unless
		// only one is left (a single oversized key gets overflow pages).
		end, size := start, pageHeaderSize
		for end < len(refs) && end-start < maxCount {
			s := branchElemSize + int(refs[end].klen)
			if end-start >= 2 && size+s > w.pageSize {
				break
			}
			size += s
			end++
		}
		// Do not leave a lone reference for the next page.
		if end == len(refs)-1 && end-start > 2 {
			size -= branchElemSize + int(refs[end-1].klen)
			end--
		}
		p, overflow, err := w.page(size)
		if err != nil {
			return err
		}
		id := w.next
		n := end - start
		putPageHeader(p, id, branchPageFlag, n, overflow)
		dataOff := pageHeaderSize + n*branchElemSize
		for i, r := range refs[start:end] {
			el := p[pageHeaderSize+i*branchElemSize:]
			ne.PutUint32(el[0:], uint32(dataOff-(pageHeaderSize+i*branchElemSize)))
			ne.PutUint32(el[4:], r.klen)
			ne.PutUint64(el[8:], r.pgid)
			dataOff += copy(p[dataOff:], keys[r.koff:r.koff+r.klen])
		}
		first := refs[start]
		w.addRef(keys[first.koff:first.koff+first.klen], id)
		w.next += uint64(overflow) + 1
		start = end
	}
	return nil
}

// headPages returns pages 0 to 3: the meta pages, the freelist and the root
// bucket's leaf page.
func (w *Writer) headPages() ([]byte, error) {
	ps := w.pageSize
	buf := make([]byte, firstPgid*ps)

	// Page 3: the root bucket, one element per bucket in name order.
	bs := slices.Clone(w.buckets)
	slices.SortFunc(bs, func(a, b bucketRoot) int { return bytes.Compare(a.name, b.name) })
	root := buf[rootPgid*ps : (rootPgid+1)*ps]
	size := pageHeaderSize
	for _, b := range bs {
		size += leafElemSize + len(b.name) + bucketHeaderSize
	}
	if size > ps || len(bs) > maxCount {
		return nil, fmt.Errorf("boltpack: %d bucket names do not fit in a page", len(bs))
	}
	putPageHeader(root, rootPgid, leafPageFlag, len(bs), 0)
	off := pageHeaderSize + len(bs)*leafElemSize
	for i, b := range bs {
		el := root[pageHeaderSize+i*leafElemSize:]
		ne.PutUint32(el[0:], bucketLeafFlag)
		ne.PutUint32(el[4:], uint32(off-(pageHeaderSize+i*leafElemSize)))
		ne.PutUint32(el[8:], uint32(len(b.name)))
		ne.PutUint32(el[12:], bucketHeaderSize)
		off += copy(root[off:], b.name)
		ne.PutUint64(root[off:], b.root) // InBucket.root
		ne.PutUint64(root[off+8:], 0)    // InBucket.sequence
		off += bucketHeaderSize
	}

	// Page 2: an empty freelist.
	putPageHeader(buf[freelistPgid*ps:], freelistPgid, freelistPageFlag, 0, 0)

	// Pages 0 and 1: the meta pages.
	for txid := uint64(0); txid < 2; txid++ {
		p := buf[txid*uint64(ps):]
		putPageHeader(p, txid, metaPageFlag, 0, 0)
		m := p[pageHeaderSize : pageHeaderSize+metaSize]
		ne.PutUint32(m[0:], magic)
		ne.PutUint32(m[4:], formatVersion)
		ne.PutUint32(m[8:], uint32(ps))
		ne.PutUint32(m[12:], 0)        // flags
		ne.PutUint64(m[16:], rootPgid) // root bucket: page
		ne.PutUint64(m[24:], 0)        // root bucket: sequence
		ne.PutUint64(m[32:], freelistPgid)
		ne.PutUint64(m[40:], w.next) // high water mark
		ne.PutUint64(m[48:], txid)
		h := fnv.New64a()
		h.Write(m[:56])
		ne.PutUint64(m[56:], h.Sum64())
	}
	return buf, nil
}
