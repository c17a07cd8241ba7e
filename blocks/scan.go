package blocks

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"

	"github.com/klauspost/compress/s2"
)

// Range is the keys from Start (included) to End (excluded), in bytewise
// order. A nil (or empty) Start is the first key, a nil (or empty) End the
// end of the partition.
type Range struct {
	Start, End []byte
}

// before reports whether k is before r.End.
func (r Range) before(k []byte) bool {
	return len(r.End) == 0 || bytes.Compare(k, r.End) < 0
}

// View calls fn with a Reader of the version, which reads partitions in
// key order (Reader.Iter). The Reader and its iterators are valid only
// inside fn: View ends their read transactions when fn returns. Close
// waits for a View under way, as it waits for Gets, so fn must not block
// on anything but its own reading; a later View returns ErrClosed. View
// returns fn's error.
//
// A damaged page or block met by an iterator ends that iterator with an
// error wrapping ErrCorrupt (bbolt's panics on damaged pages are
// recovered, and the transaction is ended rather than reused), never a
// wrong key.
func (v *Version) View(fn func(*Reader) error) error {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.closed {
		return ErrClosed
	}
	r := readers.Get().(*Reader)
	r.c = v.contents.Load()
	defer r.release()
	return fn(r)
}

// Reader reads a version's partitions in key order, inside Version.View.
// Not safe for concurrent use.
type Reader struct {
	c     *contents
	iters []*Iter // iters[:n] are this View's; the others wait for reuse
	n     int
}

// readers are pooled with their iterators: a listing's page opens a View
// and an iterator per partition, and their allocations were a tenth of
// the page's.
var readers = sync.Pool{New: func() any { return new(Reader) }}

// maxPooledIterBuf bounds the key and value buffers a pooled iterator
// keeps.
const maxPooledIterBuf = 64 << 10

// Manifest is the manifest of the contents the Reader reads.
func (r *Reader) Manifest() *Manifest { return r.c.manifest }

// Holds reports whether partition p is held (readable by Iter).
func (r *Reader) Holds(p int) bool { return r.c.holds(p) }

// Iter returns an iterator over the records of partition p in rg, in
// key order, positioned before the first: call Next. ErrPartitionNotHeld
// when p is not held here. The iterator keeps rg's slices: the caller must
// not change them while it is used.
func (r *Reader) Iter(p int, rg Range) (_ *Iter, err error) {
	if !r.c.holds(p) {
		return nil, ErrPartitionNotHeld
	}
	part := r.c.parts[p]
	rt, err := part.acquire()
	if err != nil {
		return nil, fmt.Errorf("blocks: %s/%s partition %d: %w", r.c.manifest.DB, r.c.manifest.Version, p, err)
	}
	it := r.next()
	*it = Iter{r: r, p: p, part: part, rt: rt, rg: rg, dec: r.c.dec, keyBuf: it.keyBuf[:0], valBuf: it.valBuf[:0]}
	return it, nil
}

// next returns an unused iterator of r, the View's from now on.
func (r *Reader) next() *Iter {
	if r.n == len(r.iters) {
		r.iters = append(r.iters, new(Iter))
	}
	it := r.iters[r.n]
	r.n++
	return it
}

// release ends or returns the iterators' read transactions, and r to the
// pool.
func (r *Reader) release() {
	for _, it := range r.iters[:r.n] {
		if it.scratch != nil && cap(it.block) == cap(it.scratch.raw) {
			blockScratches.Put(it.scratch)
		}
		switch {
		case it.rt == nil: // resumed at the range's end: none taken
		case it.broken:
			it.rt.discard()
		default:
			it.part.release(it.rt)
		}
		keyBuf, valBuf := it.keyBuf, it.valBuf
		if cap(keyBuf) > maxPooledIterBuf {
			keyBuf = nil
		}
		if cap(valBuf) > maxPooledIterBuf {
			valBuf = nil
		}
		*it = Iter{keyBuf: keyBuf[:0], valBuf: valBuf[:0]}
	}
	r.c, r.n = nil, 0
	readers.Put(r)
}

// Iter walks one partition's records in key order. Its keys and values
// are valid until the next call of Next, and only inside the View that
// made it. Not safe for concurrent use.
type Iter struct {
	r       *Reader
	p       int
	part    *partition
	rt      *readTx
	rg      Range
	dec     *valueDecoder
	started bool
	done    bool
	broken  bool // a panic ended the read transaction's usefulness
	err     error

	key, val []byte // the current record, record layout: val is as stored

	// blocks layout: the decoded block and the position in it. Offsets,
	// not slices of block, and a key buffer written back only when it
	// grows: a listing calls Next for every record, and each pointer
	// written into the iterator is a write barrier while the GC marks.
	block    []byte        // decoded records of the current block
	scratch  *blockScratch // pooled; returned when the View ends
	off      int           // the next record starts at block[off:]
	valOff   int           // the current value is block[valOff:off]
	onRecord bool          // keyBuf and block[valOff:off] are a record
	skip     bool          // records before rg.Start may follow (the first block)
	prefixed bool          // keys of block share their prefixes (format 3)
	keyBuf   []byte        // the rebuilt key, blocks layout
	valBuf   []byte        // a decoded value, record layout
	blockKey []byte        // the current block's bbolt key (its first key), blocks layout

	// A resumed iterator (Reader.Resume): pending, its first Next stays
	// on the record it resumed at; seekKey, its cursor is not yet
	// positioned: the next block is the one after seekKey's.
	pending bool
	seekKey []byte
}

// Next moves to the next record of the range; false at its end or on an
// error (Err).
func (it *Iter) Next() bool {
	if it.done {
		return false
	}
	if it.pending {
		it.pending = false
		return true
	}
	if it.off < len(it.block) {
		// The blocks layout, records left in the decoded block: no page
		// of bbolt's is read, so no panic to recover (and no defer).
		if ok, decided := it.inBlock(); decided {
			return ok
		}
	}
	return it.next()
}

// next is Next reading bbolt's pages: the record layout, or the next
// block.
func (it *Iter) next() (ok bool) {
	defer func() {
		if rec := recover(); rec != nil {
			it.broken = true
			it.fail(fmt.Errorf("%w: %s/%s partition %d: %v", ErrCorrupt, it.r.c.manifest.DB, it.r.c.manifest.Version, it.p, rec))
			ok = false
		}
	}()
	if it.part.blocks {
		return it.nextInBlocks()
	}
	var k, v []byte
	if !it.started {
		it.started = true
		if len(it.rg.Start) == 0 {
			k, v = it.rt.cur.First()
		} else {
			k, v = it.rt.cur.Seek(it.rg.Start)
		}
	} else {
		k, v = it.rt.cur.Next()
	}
	if k == nil || !it.rg.before(k) {
		it.done = true
		return false
	}
	if v == nil {
		it.fail(fmt.Errorf("%w: %s/%s partition %d: a bucket among the records", ErrCorrupt, it.r.c.manifest.DB, it.r.c.manifest.Version, it.p))
		return false
	}
	it.key, it.val = k, v
	return true
}

func (it *Iter) fail(err error) {
	it.err, it.done = err, true
	it.key, it.val, it.onRecord = nil, nil, false
}

// nextInBlocks is Next in the blocks layout: records are read from the
// decoded block, and the next block is decoded once it runs out.
func (it *Iter) nextInBlocks() bool {
	for {
		if it.off == len(it.block) {
			var first, stored []byte
			if !it.started {
				it.started = true
				it.skip = len(it.rg.Start) > 0
				// The block holding Start, if any, is the last one whose
				// first key is not after it.
				if len(it.rg.Start) == 0 {
					first, stored = it.rt.cur.First()
				} else {
					first, stored = it.rt.cur.Seek(it.rg.Start)
					switch {
					case first == nil:
						first, stored = it.rt.cur.Last()
					case !bytes.Equal(first, it.rg.Start):
						if k, v := it.rt.cur.Prev(); k != nil {
							first, stored = k, v
						} else {
							first, stored = it.rt.cur.First()
						}
					}
				}
			} else {
				if it.seekKey != nil {
					// Resumed: the cursor finds the block it left.
					if k, _ := it.rt.cur.Seek(it.seekKey); !bytes.Equal(k, it.seekKey) {
						it.fail(fmt.Errorf("%w: %s/%s partition %d: a resumed block %q is gone", ErrCorrupt, it.r.c.manifest.DB, it.r.c.manifest.Version, it.p, truncateKey(it.seekKey)))
						return false
					}
					it.seekKey = nil
				}
				first, stored = it.rt.cur.Next()
			}
			if first == nil || !it.rg.before(first) {
				it.done, it.onRecord = true, false
				return false
			}
			it.blockKey = first
			if err := it.decodeBlock(stored); err != nil {
				it.fail(fmt.Errorf("blocks: %s/%s partition %d block %q: %w", it.r.c.manifest.DB, it.r.c.manifest.Version, it.p, truncateKey(first), err))
				return false
			}
			if len(it.block) == 0 {
				it.fail(fmt.Errorf("%w: %s/%s partition %d: an empty block", ErrCorrupt, it.r.c.manifest.DB, it.r.c.manifest.Version, it.p))
				return false
			}
		}
		if ok, decided := it.inBlock(); decided {
			return ok
		}
	}
}

// inBlock moves to the next record of the range in the decoded block;
// decided is false when the block ran out first. It reads only the
// decoded block, whose lengths nextRecord checks: it cannot panic.
func (it *Iter) inBlock() (ok, decided bool) {
	for it.off < len(it.block) {
		if err := it.nextRecord(); err != nil {
			it.fail(fmt.Errorf("blocks: %s/%s partition %d: %w", it.r.c.manifest.DB, it.r.c.manifest.Version, it.p, err))
			return false, true
		}
		if it.skip {
			if bytes.Compare(it.keyBuf, it.rg.Start) < 0 {
				continue
			}
			it.skip = false
		}
		if len(it.rg.End) > 0 && bytes.Compare(it.keyBuf, it.rg.End) >= 0 {
			it.done, it.onRecord = true, false
			return false, true
		}
		it.onRecord = true
		return true, true
	}
	return false, false
}

// decodeBlock decodes a stored block into it.block, checking it as
// findInBlock does (tag, CRC, size bounded by the partition's largest).
func (it *Iter) decodeBlock(stored []byte) error {
	src, n, prefixed, err := blockPayload(stored, it.part.blockMax)
	if err != nil {
		return err
	}
	if cap(it.block) < n {
		if n <= scratchSize && it.scratch == nil {
			// A lookup's pooled buffer: a listing opens an iterator per
			// partition per page, and each would allocate one.
			it.scratch = blockScratches.Get().(*blockScratch)
			it.block = it.scratch.raw[:0]
		} else {
			it.block = make([]byte, n)
		}
	}
	raw, err := s2.Decode(it.block[:n], src)
	if err != nil {
		return fmt.Errorf("%w: %w: s2: %v", ErrCorrupt, errBadValue, err)
	}
	it.block, it.off, it.valOff, it.onRecord, it.prefixed = raw, 0, 0, false, prefixed
	it.keyBuf = it.keyBuf[:0]
	return nil
}

// nextRecord reads the record at it.off of the decoded block: its key
// into it.keyBuf, its value's offsets into it.valOff and it.off.
func (it *Iter) nextRecord() error {
	raw := it.block[it.off:]
	var shared uint64
	if it.prefixed {
		var m int
		if shared, m = binary.Uvarint(raw); m <= 0 || shared > uint64(len(it.keyBuf)) {
			return fmt.Errorf("%w: %w: truncated block", ErrCorrupt, errBadValue)
		}
		raw = raw[m:]
	}
	klen, m := binary.Uvarint(raw)
	if m <= 0 || klen > uint64(len(raw)-m) {
		return fmt.Errorf("%w: %w: truncated block", ErrCorrupt, errBadValue)
	}
	// The key buffer's pointer is written only when it grows: a slice
	// resliced onto itself updates its length alone, where an append
	// writes the pointer back (a write barrier per record while the GC
	// marks).
	if n := int(shared) + int(klen); n <= cap(it.keyBuf) {
		it.keyBuf = it.keyBuf[:n]
		copy(it.keyBuf[shared:], raw[m:m+int(klen)])
	} else {
		it.keyBuf = append(it.keyBuf[:shared], raw[m:m+int(klen)]...)
	}
	raw = raw[m+int(klen):]
	vlen, m := binary.Uvarint(raw)
	if m <= 0 || vlen > uint64(len(raw)-m) {
		return fmt.Errorf("%w: %w: truncated block", ErrCorrupt, errBadValue)
	}
	it.valOff = len(it.block) - len(raw) + m
	it.off = it.valOff + int(vlen)
	return nil
}

// A Position is where an iterator stood when it was suspended
// (Iter.Suspend): at the end of its range, or, in the blocks layout, on
// a record, with the decoded block around it, so that an iterator
// resumed from it (Reader.Resume, in a later View) reads neither the
// record's block nor the records before it again. The zero Position
// resumes nothing. A Position holds no read transaction and no lock; it
// holds the decoded block's memory (Size).
type Position struct {
	c        *contents // the version's contents it is good for
	p        int
	ended    bool
	block    []byte        // the decoded block
	scratch  *blockScratch // block's pooled buffer, if it is one
	off      int           // the records after the current one start at block[off:]
	valOff   int           // the current value is block[valOff:off]
	key      []byte        // the current key
	blockKey []byte        // the block's bbolt key
	prefixed bool
}

// Size is the memory a Position holds, in bytes.
func (pos *Position) Size() int {
	return cap(pos.block) + cap(pos.key) + cap(pos.blockKey)
}

// Suspend returns where the iterator stands: its current record (the
// one Key returns, which the next iterator's first Next returns again),
// or the end of its range. false when it cannot say: an error, a record
// of the record layout (whose bbolt cursor cannot be kept), no Next yet.
// The iterator is not used after: the Position takes its block.
func (it *Iter) Suspend() (Position, bool) {
	switch {
	case it.err != nil || it.broken || !it.started:
		return Position{}, false
	case it.done:
		return Position{c: it.r.c, p: it.p, ended: true}, true
	case !it.part.blocks || !it.onRecord:
		return Position{}, false
	}
	pos := Position{
		c: it.r.c, p: it.p, block: it.block, off: it.off, valOff: it.valOff,
		key: it.keyBuf, blockKey: bytes.Clone(it.blockKey), prefixed: it.prefixed,
	}
	if it.scratch != nil && cap(it.block) == cap(it.scratch.raw) {
		pos.scratch = it.scratch
	}
	it.scratch, it.block, it.keyBuf = nil, nil, nil
	it.off, it.valOff, it.onRecord, it.done = 0, 0, false, true
	return pos, true
}

// Resume returns an iterator of partition p in rg that continues from
// pos: its first Next returns pos's record, then those after it; or, when
// pos was suspended at the end of its range, an iterator that has
// ended. A pos that is not of p in the Reader's version (another version,
// or contents that changed since) is ignored: Resume is then Iter. The
// caller vouches that pos's record is the first of p in rg (it stood
// there for a range with rg's End, and every key of p before it is before
// rg.Start). pos is not used after.
func (r *Reader) Resume(p int, rg Range, pos Position) (*Iter, error) {
	if pos.c != r.c || pos.p != p {
		return r.Iter(p, rg)
	}
	if !r.c.holds(p) {
		return nil, ErrPartitionNotHeld
	}
	part := r.c.parts[p]
	it := r.next()
	*it = Iter{r: r, p: p, part: part, rg: rg, dec: r.c.dec, valBuf: it.valBuf[:0], started: true}
	if pos.ended {
		it.done = true
		return it, nil
	}
	rt, err := part.acquire()
	if err != nil {
		return nil, fmt.Errorf("blocks: %s/%s partition %d: %w", r.c.manifest.DB, r.c.manifest.Version, p, err)
	}
	it.rt = rt
	it.block, it.scratch, it.off, it.valOff, it.prefixed = pos.block, pos.scratch, pos.off, pos.valOff, pos.prefixed
	it.keyBuf, it.seekKey, it.blockKey = pos.key, pos.blockKey, pos.blockKey
	it.onRecord, it.pending = true, true
	return it, nil
}

// Key is the current record's key, valid until the next call of Next.
func (it *Iter) Key() []byte {
	if it.onRecord {
		return it.keyBuf
	}
	return it.key
}

// Value is the current record's value, decoded, valid until the next
// call of Next (the caller copies what it keeps).
func (it *Iter) Value() (_ []byte, err error) {
	if it.onRecord {
		return it.block[it.valOff:it.off], nil
	}
	if it.key == nil {
		return nil, errors.New("blocks: Value without a record")
	}
	defer func() {
		if rec := recover(); rec != nil {
			err = fmt.Errorf("%w: %s/%s partition %d: %v", ErrCorrupt, it.r.c.manifest.DB, it.r.c.manifest.Version, it.p, rec)
		}
	}()
	it.valBuf, err = it.dec.decode(it.valBuf[:0], it.val, it.part.sdict, -1)
	if err != nil {
		return nil, fmt.Errorf("blocks: %s/%s partition %d key %q: %w", it.r.c.manifest.DB, it.r.c.manifest.Version, it.p, truncateKey(it.key), err)
	}
	return it.valBuf, nil
}

// stored is the current record's value as stored, in the record layout
// only (not blocks), valid until the next call of Next.
func (it *Iter) stored() []byte { return it.val }

// Err is the error that ended the iteration, nil at the range's end.
func (it *Iter) Err() error { return it.err }

// blockPayload checks a stored block (tag, CRC of format 3) and returns
// its S2 data, its decoded size (at most blockMax: a damaged size
// allocates nothing) and whether its keys share prefixes.
func blockPayload(v []byte, blockMax int) (src []byte, n int, prefixed bool, err error) {
	return blockBody(v, blockMax, true)
}

// blockBody is blockPayload checking the CRC only if checkCRC.
func blockBody(v []byte, blockMax int, checkCRC bool) (src []byte, n int, prefixed bool, err error) {
	if len(v) == 0 || (v[0] != tagPrefixRecords && v[0] != tagRecords) {
		return nil, 0, false, fmt.Errorf("%w: %w: not a block of records", ErrCorrupt, errBadValue)
	}
	prefixed = v[0] == tagPrefixRecords
	if v = v[1:]; prefixed {
		if len(v) < blockHeader-1 {
			return nil, 0, false, fmt.Errorf("%w: %w: a block of %d bytes", ErrCorrupt, errBadValue, len(v))
		}
		sum := binary.LittleEndian.Uint32(v)
		if v = v[blockHeader-1:]; checkCRC && crc32.Checksum(v, castagnoli) != sum {
			return nil, 0, false, fmt.Errorf("%w: %w: a block's CRC does not match its bytes", ErrCorrupt, errBadValue)
		}
	}
	n, err = s2.DecodedLen(v)
	if err != nil {
		return nil, 0, false, fmt.Errorf("%w: %w: s2: %v", ErrCorrupt, errBadValue, err)
	}
	if n > blockMax {
		return nil, 0, false, fmt.Errorf("%w: %w: a block of %d bytes, over the partition's %d", ErrCorrupt, errBadValue, n, blockMax)
	}
	return v, n, prefixed, nil
}

// ScanOptions bound a Scan.
type ScanOptions struct {
	Range
	// Limit is the most records returned; 0 or less is none.
	Limit int
	// MaxBytes bounds the keys (and values, with Values) returned: the
	// record that would pass it is not returned. 0 or less is none.
	MaxBytes int
	// Values returns the values too.
	Values bool
}

// Record is a key and, when asked for, its value.
type Record struct {
	Key, Value []byte
}

// Scan returns the records of partition p in opts' range, in key order,
// at most opts.Limit of them and opts.MaxBytes of bytes, copied (the
// caller owns them), and whether more records of the range follow. It
// is View with one iterator.
func (v *Version) Scan(p int, opts ScanOptions) (recs []Record, more bool, err error) {
	err = v.View(func(r *Reader) error {
		it, err := r.Iter(p, opts.Range)
		if err != nil {
			return err
		}
		size := 0
		for it.Next() {
			if opts.Limit > 0 && len(recs) == opts.Limit {
				more = true
				return nil
			}
			rec := Record{Key: it.Key()}
			if opts.Values {
				if rec.Value, err = it.Value(); err != nil {
					return err
				}
			}
			size += len(rec.Key) + len(rec.Value)
			if opts.MaxBytes > 0 && size > opts.MaxBytes {
				if len(recs) == 0 {
					return fmt.Errorf("%w: a record of %d bytes, over %d", ErrTooLarge, len(rec.Key)+len(rec.Value), opts.MaxBytes)
				}
				more = true
				return nil
			}
			rec.Key = bytes.Clone(rec.Key)
			if opts.Values {
				rec.Value = append([]byte{}, rec.Value...)
			}
			recs = append(recs, rec)
		}
		return it.Err()
	})
	if err != nil {
		return nil, false, err
	}
	return recs, more, nil
}
