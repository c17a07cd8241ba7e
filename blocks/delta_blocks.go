package blocks

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/klauspost/compress/s2"
	bolt "go.etcd.io/bbolt"
)

// A delta over a base stored in blocks (CompressionS2Blocks, the same
// compression) copies the base's blocks that no delta key falls in as
// they are stored (their CRC kept, not checked: copiedLen), and decodes,
// merges and packs again only the others: with 1 % of the keys changed
// at random, about a quarter of the blocks.
// A block's keys run from its first key to the next block's first key.
// The partition's digest, records and bytes follow from the base's.

// blockMerge is a delta merge over a base partition in blocks: the base's
// cursor (its read transaction held by withBase) and the delta's records.
type blockMerge struct {
	cur     *bolt.Cursor
	part    *partition
	delta   recordIter
	delFrom uint32
	counts  *deltaCounts
	keep    int64    // Options.DeltaKeys
	keys    [][]byte // changed keys kept (deltaCounts.note)
}

// blockMerge is a recordIter only in name: writePartition hands it to
// writeBlockMerge.
func (*blockMerge) next() bool    { return false }
func (*blockMerge) key() []byte   { return nil }
func (*blockMerge) value() []byte { return nil }
func (*blockMerge) seq() uint64   { return 0 }
func (m *blockMerge) err() error  { return nil }

// errTruncatedBlock: a decoded block's records end before their lengths.
var errTruncatedBlock = fmt.Errorf("%w: %w: truncated block", ErrCorrupt, errBadValue)

// copiedLen returns the decoded size of a stored block a merge copies as
// it is: its tag, header and S2 length checked (the size bounded by
// blockMax, as blockPayload does), not its CRC, which the copy keeps:
// every lookup in the new version checks it, as in the base's, so that
// damage is ErrCorrupt there too, never a wrong value. (Checking it
// here read every byte of the base: a tenth of a delta build's CPU.)
func copiedLen(v []byte, blockMax int) (int, error) {
	if len(v) == 0 || (v[0] != tagPrefixRecords && v[0] != tagRecords) {
		return 0, fmt.Errorf("%w: %w: not a block of records", ErrCorrupt, errBadValue)
	}
	hdr := 1
	if v[0] == tagPrefixRecords {
		hdr = blockHeader
	}
	if len(v) < hdr {
		return 0, fmt.Errorf("%w: %w: a block of %d bytes", ErrCorrupt, errBadValue, len(v))
	}
	n, err := s2.DecodedLen(v[hdr:])
	if err != nil {
		return 0, fmt.Errorf("%w: %w: s2: %v", ErrCorrupt, errBadValue, err)
	}
	if n > blockMax {
		return 0, fmt.Errorf("%w: %w: a block of %d bytes, over the partition's %d", ErrCorrupt, errBadValue, n, blockMax)
	}
	return n, nil
}

// eachBlockRecord calls fn with every record of a stored block, decoded
// into *buf, its keys rebuilt in *key (both kept for the next block).
func eachBlockRecord(stored []byte, blockMax int, buf, keyBuf *[]byte, fn func(k, v []byte) error) error {
	src, n, prefixed, err := blockPayload(stored, blockMax)
	if err != nil {
		return err
	}
	if cap(*buf) < n {
		*buf = make([]byte, n)
	}
	raw, err := s2.Decode((*buf)[:n], src)
	if err != nil {
		return fmt.Errorf("%w: %w: s2: %v", ErrCorrupt, errBadValue, err)
	}
	key := (*keyBuf)[:0]
	defer func() { *keyBuf = key }()
	for len(raw) > 0 {
		shared := uint64(0)
		if prefixed {
			var m int
			if shared, m = binary.Uvarint(raw); m <= 0 || shared > uint64(len(key)) {
				return errTruncatedBlock
			}
			raw = raw[m:]
		}
		klen, m := binary.Uvarint(raw)
		if m <= 0 || klen > uint64(len(raw)-m) {
			return errTruncatedBlock
		}
		key = append(key[:shared], raw[m:m+int(klen)]...)
		raw = raw[m+int(klen):]
		vlen, m := binary.Uvarint(raw)
		if m <= 0 || vlen > uint64(len(raw)-m) {
			return errTruncatedBlock
		}
		if err := fn(key, raw[m:m+int(vlen)]); err != nil {
			return err
		}
		raw = raw[m+int(vlen):]
	}
	return nil
}

// writeBlockMerge writes partition pb from the base's blocks and the
// delta's records.
func (b *builder) writeBlockMerge(ctx context.Context, pb *partBuf, m *blockMerge, base *PartitionInfo, expect int64) (partWriter, PartitionInfo, error) {
	info := PartitionInfo{Partition: pb.p}
	w, err := b.newWriter(pb.p, expect)
	if err != nil {
		return nil, info, err
	}
	packer := blockPacker{fast: true}
	var (
		removed, added Digester
		removedBytes   int64
		addedBytes     int64
		maxBlock       int
		buf, keyBuf    []byte
	)
	put := func(k, v []byte) error {
		if k == nil {
			return nil
		}
		return w.put(k, v)
	}
	d := m.delta
	dok := d.next()
	// emit writes the delta's current record, unless a deletion (of a
	// key the base lacks: nothing to delete), and moves on.
	emit := func() error {
		if !isDeletion(d.seq(), m.delFrom) {
			m.counts.added.Add(1)
			m.counts.note(m.keep, &m.keys, d.key())
			added.Add(d.key(), d.value())
			addedBytes += int64(len(d.key()) + len(d.value()))
			if err := put(packer.add(d.key(), d.value())); err != nil {
				return err
			}
		}
		dok = d.next()
		return nil
	}
	blocks := 0
	k, v := m.cur.First()
	for k != nil {
		if blocks++; blocks%1024 == 0 {
			if err := ctx.Err(); err != nil {
				w.abort()
				return nil, info, err
			}
		}
		nk, nv := m.cur.Next()
		inBlock := func() bool { return dok && (nk == nil || bytes.Compare(d.key(), nk) < 0) }
		if !inBlock() { // untouched: copied as stored
			if err := put(packer.flush()); err != nil {
				w.abort()
				return nil, info, err
			}
			n, err := copiedLen(v, m.part.blockMax)
			if err == nil {
				maxBlock = max(maxBlock, n)
				err = put(k, v)
			}
			if err != nil {
				w.abort()
				return nil, info, fmt.Errorf("base block %q: %w", truncateKey(k), err)
			}
			k, v = nk, nv
			continue
		}
		err := eachBlockRecord(v, m.part.blockMax, &buf, &keyBuf, func(rk, rv []byte) error {
			for dok && bytes.Compare(d.key(), rk) < 0 {
				if err := emit(); err != nil {
					return err
				}
			}
			if dok && bytes.Equal(d.key(), rk) {
				del := isDeletion(d.seq(), m.delFrom)
				switch {
				case del:
					m.counts.deleted.Add(1)
					m.counts.note(m.keep, &m.keys, rk)
				case bytes.Equal(rv, d.value()):
					m.counts.unchanged.Add(1)
				default:
					m.counts.changed.Add(1)
					m.counts.note(m.keep, &m.keys, rk)
				}
				removed.Add(rk, rv)
				removedBytes += int64(len(rk) + len(rv))
				if !del {
					added.Add(d.key(), d.value())
					addedBytes += int64(len(d.key()) + len(d.value()))
					if err := put(packer.add(d.key(), d.value())); err != nil {
						return err
					}
				}
				dok = d.next()
				return nil
			}
			return put(packer.add(rk, rv))
		})
		for err == nil && inBlock() {
			err = emit()
		}
		if err != nil {
			w.abort()
			return nil, info, fmt.Errorf("base block %q: %w", truncateKey(k), err)
		}
		k, v = nk, nv
	}
	var err2 error
	for err2 == nil && dok {
		err2 = emit()
	}
	if err2 == nil {
		err2 = d.err()
	}
	if err2 == nil {
		err2 = put(packer.flush())
	}
	if err2 != nil {
		w.abort()
		return nil, info, err2
	}
	maxBlock = max(maxBlock, packer.max)
	bd, err := ParseDigest(base.Digest)
	if err != nil {
		w.abort()
		return nil, info, err
	}
	dg := bd.Add(added.Digest).Sub(removed.Digest)
	info.Digest, info.Records, info.Bytes = dg.String(), dg.Records, base.Bytes-removedBytes+addedBytes
	meta := map[string][]byte{
		metaLayout:    []byte(layoutBlocks),
		metaBlockMax:  []byte(strconv.Itoa(maxBlock)),
		metaFormat:    []byte(strconv.Itoa(blocksFormat)),
		metaPartition: []byte(strconv.Itoa(pb.p)),
		metaRecords:   []byte(strconv.FormatInt(info.Records, 10)),
	}
	if err := w.finish(meta); err != nil {
		w.abort()
		return nil, info, err
	}
	return w, info, nil
}
