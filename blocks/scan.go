package blocks

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

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
	r := &Reader{c: v.contents.Load()}
	defer r.release()
	return fn(r)
}

// Reader reads a version's partitions in key order, inside Version.View.
// Not safe for concurrent use.
type Reader struct {
	c     *contents
	iters []*Iter
}

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
	it := &Iter{r: r, p: p, part: part, rt: rt, rg: rg, dec: r.c.dec}
	r.iters = append(r.iters, it)
	return it, nil
}

// release ends or returns the iterators' read transactions.
func (r *Reader) release() {
	for _, it := range r.iters {
		if it.scratch != nil && cap(it.block) == cap(it.scratch.raw) {
			blockScratches.Put(it.scratch)
		}
		it.scratch, it.block, it.rest = nil, nil, nil
		if it.broken {
			it.rt.discard()
		} else {
			it.part.release(it.rt)
		}
	}
	r.iters = nil
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

	key, val []byte // the current record; val is stored (record layout) or raw (blocks)

	// blocks layout: the decoded block and the position in it.
	block    []byte        // decoded records of the current block
	scratch  *blockScratch // pooled; returned when the View ends
	rest     []byte        // what is left to read of block
	prefixed bool          // keys of block share their prefixes (format 3)
	keyBuf   []byte        // the rebuilt key, blocks layout
	valBuf   []byte        // a decoded value, record layout
}

// Next moves to the next record of the range; false at its end or on an
// error (Err).
func (it *Iter) Next() (ok bool) {
	if it.done {
		return false
	}
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
	it.key, it.val = nil, nil
}

// nextInBlocks is Next in the blocks layout: records are read from the
// decoded block, and the next block is decoded once it runs out.
func (it *Iter) nextInBlocks() bool {
	for {
		if len(it.rest) == 0 {
			var first, stored []byte
			if !it.started {
				it.started = true
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
				first, stored = it.rt.cur.Next()
			}
			if first == nil || !it.rg.before(first) {
				it.done = true
				return false
			}
			if err := it.decodeBlock(stored); err != nil {
				it.fail(fmt.Errorf("blocks: %s/%s partition %d block %q: %w", it.r.c.manifest.DB, it.r.c.manifest.Version, it.p, truncateKey(first), err))
				return false
			}
			if len(it.rest) == 0 {
				it.fail(fmt.Errorf("%w: %s/%s partition %d: an empty block", ErrCorrupt, it.r.c.manifest.DB, it.r.c.manifest.Version, it.p))
				return false
			}
		}
		k, v, err := it.nextRecord()
		if err != nil {
			it.fail(fmt.Errorf("blocks: %s/%s partition %d: %w", it.r.c.manifest.DB, it.r.c.manifest.Version, it.p, err))
			return false
		}
		if len(it.rg.Start) > 0 && bytes.Compare(k, it.rg.Start) < 0 {
			continue
		}
		if !it.rg.before(k) {
			it.done = true
			return false
		}
		it.key, it.val = k, v
		return true
	}
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
	it.rest, it.prefixed = raw, prefixed
	it.keyBuf = it.keyBuf[:0]
	return nil
}

// nextRecord reads the next record of the decoded block. The key is
// rebuilt in it.keyBuf; the value points into it.block.
func (it *Iter) nextRecord() (k, v []byte, err error) {
	raw := it.rest
	var shared uint64
	if it.prefixed {
		var m int
		if shared, m = binary.Uvarint(raw); m <= 0 || shared > uint64(len(it.keyBuf)) {
			return nil, nil, fmt.Errorf("%w: %w: truncated block", ErrCorrupt, errBadValue)
		}
		raw = raw[m:]
	}
	klen, m := binary.Uvarint(raw)
	if m <= 0 || klen > uint64(len(raw)-m) {
		return nil, nil, fmt.Errorf("%w: %w: truncated block", ErrCorrupt, errBadValue)
	}
	it.keyBuf = append(it.keyBuf[:shared], raw[m:m+int(klen)]...)
	raw = raw[m+int(klen):]
	vlen, m := binary.Uvarint(raw)
	if m <= 0 || vlen > uint64(len(raw)-m) {
		return nil, nil, fmt.Errorf("%w: %w: truncated block", ErrCorrupt, errBadValue)
	}
	v = raw[m : m+int(vlen)]
	it.rest = raw[m+int(vlen):]
	return it.keyBuf, v, nil
}

// Key is the current record's key, valid until the next call of Next.
func (it *Iter) Key() []byte { return it.key }

// Value is the current record's value, decoded, valid until the next
// call of Next (the caller copies what it keeps).
func (it *Iter) Value() (_ []byte, err error) {
	if it.key == nil {
		return nil, errors.New("blocks: Value without a record")
	}
	if it.part.blocks {
		return it.val, nil
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

// Err is the error that ended the iteration, nil at the range's end.
func (it *Iter) Err() error { return it.err }

// blockPayload checks a stored block (tag, CRC of format 3) and returns
// its S2 data, its decoded size (at most blockMax: a damaged size
// allocates nothing) and whether its keys share prefixes.
func blockPayload(v []byte, blockMax int) (src []byte, n int, prefixed bool, err error) {
	if len(v) == 0 || (v[0] != tagPrefixRecords && v[0] != tagRecords) {
		return nil, 0, false, fmt.Errorf("%w: %w: not a block of records", ErrCorrupt, errBadValue)
	}
	prefixed = v[0] == tagPrefixRecords
	if v = v[1:]; prefixed {
		if len(v) < blockHeader-1 {
			return nil, 0, false, fmt.Errorf("%w: %w: a block of %d bytes", ErrCorrupt, errBadValue, len(v))
		}
		sum := binary.LittleEndian.Uint32(v)
		if v = v[blockHeader-1:]; crc32.Checksum(v, castagnoli) != sum {
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
