package blocks

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// A delta build (BuildSpec.Base) writes each held partition by merging
// three sorted inputs into a new bbolt file: the base's partition, read in
// key order from its own bbolt file, and the delta's upserts and
// deletions of that partition, loaded, partitioned and sorted as a full
// build's records are (they are a small part of the version). The base is
// never sorted again. A key both upserted and deleted by the delta fails
// the build (ErrBadInput), whichever files hold the two; a deleted key
// the base lacks is ignored.

// deltaSpec checks a delta's spec against its base and returns it with
// the deletions appended to Files, and the number of partitions.
func deltaSpec(spec BuildSpec) (BuildSpec, int, error) {
	if spec.Base == nil {
		return spec, 0, fmt.Errorf("%w: deletions without a base", ErrInvalidSpec)
	}
	bm := spec.Base.Manifest()
	if bm.DB != spec.DB {
		return spec, 0, fmt.Errorf("%w: base %s/%s is of another db", ErrInvalidSpec, bm.DB, bm.Version)
	}
	if spec.PartitionerID != bm.Partitioner {
		return spec, 0, fmt.Errorf("%w: base %s was built with partitioner %s, the delta with %s", ErrInvalidSpec, bm.Version, bm.Partitioner, spec.PartitionerID)
	}
	if spec.Format == FormatSparkey {
		return spec, 0, fmt.Errorf("%w: a delta's upserts cannot be Sparkey logs", ErrInvalidSpec)
	}
	n := bm.NumPartitions
	if spec.Partitions == nil {
		spec.Partitions = slices.Clone(bm.Partitions) // nil: the base's
	}
	for _, p := range spec.Partitions {
		if _, ok := slices.BinarySearch(bm.Partitions, p); !ok {
			return spec, 0, fmt.Errorf("%w: base %s does not hold partition %d", ErrInvalidSpec, bm.Version, p)
		}
	}
	for i, f := range spec.Deletes {
		if f.Open == nil {
			return spec, 0, fmt.Errorf("%w: deletions file %d (%q) has no Open", ErrInvalidSpec, i, f.Name)
		}
	}
	spec.Files = append(slices.Clip(spec.Files), spec.Deletes...)
	return spec, n, nil
}

// isDeleteFile reports whether spec file i lists deleted keys.
func (b *builder) isDeleteFile(i int) bool { return uint32(i) >= b.delFrom }

// deltaCounts are a delta build's DeltaInfo counts, over all partitions,
// and the changed keys it keeps (Options.DeltaKeys).
type deltaCounts struct {
	added, changed, unchanged, deleted atomic.Int64

	kept atomic.Int64 // changed keys noted, kept or not
	mu   sync.Mutex
	keys map[int][][]byte // by partition, in key order
}

// note counts changed key k of a partition, kept in *keys while at most
// keep have been noted over the build.
func (c *deltaCounts) note(keep int64, keys *[][]byte, k []byte) {
	if keep > 0 && c.kept.Add(1) <= keep {
		*keys = append(*keys, bytes.Clone(k))
	}
}

// put keeps partition p's changed keys, once its merge is done.
func (c *deltaCounts) put(p int, keys [][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keys == nil {
		c.keys = map[int][][]byte{}
	}
	c.keys[p] = keys
}

// result returns the changed keys of the partitions held, nil if the
// build noted more than keep (or keep is 0).
func (c *deltaCounts) result(keep int64, held []int) *deltaKeys {
	if keep <= 0 || c.kept.Load() > keep {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	dk := &deltaKeys{parts: slices.Clone(held), keys: [][]byte{}}
	for _, p := range held {
		dk.keys = append(dk.keys, c.keys[p]...)
	}
	return dk
}

// deltaKeys are the keys a delta build changed in the partitions it
// built (Version.DeltaKeys).
type deltaKeys struct {
	parts []int
	keys  [][]byte
}

// DeltaKeys returns the keys this version's delta build added, changed
// or deleted against its base (Manifest.Delta.Base), in key order per
// partition, over every partition the version holds: what a switch to
// it changed, known without a diff. ok is false when the version was
// not built here as a delta, the build changed more keys than
// Options.DeltaKeys, or the version holds partitions added since.
// The caller must not modify the keys.
func (v *Version) DeltaKeys() (keys [][]byte, ok bool) {
	dk := v.deltaKeys
	if dk == nil || !slices.Equal(dk.parts, v.Manifest().Partitions) {
		return nil, false
	}
	return dk.keys, true
}

// baseMerge merges a base partition with a delta's sorted records of it:
// a delta record replaces the base's of its key, a deletion removes it.
type baseMerge struct {
	base    *Iter
	delta   recordIter
	delFrom uint32
	counts  *deltaCounts
	keep    int64    // Options.DeltaKeys
	keys    [][]byte // changed keys kept (deltaCounts.note)

	// raw: the base's unchanged records pass as they are stored (the
	// same compression and dictionary: copied, not decoded and encoded
	// again); stored says the current one is such. The partition's
	// digest and bytes are then the base's less removed plus added.
	raw, stored    bool
	removed, added Digester
	removedBytes   int64
	addedBytes     int64

	bok, dok bool // base, delta positioned on a record
	started  bool
	// advance: the inputs that gave the current record, moved on at the
	// next call.
	advBase, advDelta bool
	k, v              []byte
	failed            error
}

func (m *baseMerge) step() {
	if m.advBase {
		m.bok = m.base.Next()
	}
	if m.advDelta {
		m.dok = m.delta.next()
	}
	m.advBase, m.advDelta = false, false
}

func (m *baseMerge) next() bool {
	if !m.started {
		m.started = true
		m.advBase, m.advDelta = true, true
	}
	for {
		m.step()
		if !m.bok && m.base.Err() != nil {
			m.failed = m.base.Err()
			return false
		}
		if !m.dok && m.delta.err() != nil {
			m.failed = m.delta.err()
			return false
		}
		c := 0
		switch {
		case !m.bok && !m.dok:
			return false
		case !m.bok:
			c = 1
		case !m.dok:
			c = -1
		default:
			c = bytes.Compare(m.base.Key(), m.delta.key())
		}
		if c < 0 { // the base's record, unchanged
			m.k, m.advBase = m.base.Key(), true
			if m.raw {
				m.v, m.stored = m.base.stored(), true
				return true
			}
			v, err := m.base.Value()
			if err != nil {
				m.failed = err
				return false
			}
			m.v = v
			return true
		}
		m.advDelta = true
		m.advBase = c == 0
		del := isDeletion(m.delta.seq(), m.delFrom)
		if c == 0 {
			old, err := m.base.Value()
			if err != nil {
				m.failed = err
				return false
			}
			switch {
			case del:
				m.counts.deleted.Add(1)
				m.counts.note(m.keep, &m.keys, m.base.Key())
			case bytes.Equal(old, m.delta.value()):
				m.counts.unchanged.Add(1)
			default:
				m.counts.changed.Add(1)
				m.counts.note(m.keep, &m.keys, m.base.Key())
			}
			if m.raw {
				m.removed.Add(m.base.Key(), old)
				m.removedBytes += int64(len(m.base.Key()) + len(old))
			}
		}
		if del {
			continue // gone, or not in the base: nothing to delete
		}
		if c != 0 {
			m.counts.added.Add(1)
			m.counts.note(m.keep, &m.keys, m.delta.key())
		}
		m.k, m.v, m.stored = m.delta.key(), m.delta.value(), false
		if m.raw {
			m.added.Add(m.k, m.v)
			m.addedBytes += int64(len(m.k) + len(m.v))
		}
		return true
	}
}

// result returns the partition's digest and bytes, from the base's
// (raw merges only).
func (m *baseMerge) result(base *PartitionInfo) (digest string, bytes int64, err error) {
	d, err := ParseDigest(base.Digest)
	if err != nil {
		return "", 0, err
	}
	return d.Add(m.added.Digest).Sub(m.removed.Digest).String(), base.Bytes - m.removedBytes + m.addedBytes, nil
}

func (m *baseMerge) key() []byte   { return m.k }
func (m *baseMerge) value() []byte { return m.v }
func (m *baseMerge) seq() uint64   { return 0 }
func (m *baseMerge) err() error    { return m.failed }

// withBase runs write with the partition's records merged with the base's
// (a delta build), or as they are. dict is the base partition's
// dictionary to keep, when it has one for the build's compression; base
// the base partition's info (nil for a full build).
func (b *builder) withBase(ctx context.Context, p int, it recordIter, write func(it recordIter, dict []byte, base *PartitionInfo) error) error {
	if b.spec.Base == nil {
		return write(it, nil, nil)
	}
	return b.spec.Base.View(func(r *Reader) error {
		bit, err := r.Iter(p, Range{})
		if err != nil {
			return err
		}
		bm := r.Manifest()
		i, ok := slices.BinarySearchFunc(bm.PartitionInfo, p, func(pi PartitionInfo, p int) int { return pi.Partition - p })
		if !ok {
			return fmt.Errorf("%w: base %s: no info for partition %d", ErrCorrupt, bm.Version, p)
		}
		info := &bm.PartitionInfo[i]
		var dict []byte
		part := r.c.parts[p]
		comp, _ := bm.Compression.normalize()
		same := comp == b.comp
		if same {
			switch b.comp {
			case CompressionZstd:
				dict = part.zdict
			case CompressionS2:
				dict = part.sraw
			}
		}
		if dict == nil && b.sampleWant > 0 {
			if err := b.sampleBase(r, p); err != nil {
				return err
			}
		}
		_, derr := ParseDigest(info.Digest)
		if same && part.blocks && derr == nil {
			rt, err := part.acquire()
			if err != nil {
				return err
			}
			defer part.release(rt)
			m := &blockMerge{cur: rt.cur, part: part, delta: it, delFrom: b.delFrom, counts: &b.deltaCounts, keep: int64(b.opts.DeltaKeys)}
			err = write(m, nil, info)
			b.deltaCounts.put(p, m.keys)
			return err
		}
		m := &baseMerge{base: bit, delta: it, delFrom: b.delFrom, counts: &b.deltaCounts, keep: int64(b.opts.DeltaKeys),
			raw: same && !part.blocks && derr == nil}
		err = write(m, dict, info)
		b.deltaCounts.put(p, m.keys)
		return err
	})
}

// sampleBase adds values of the base's partition p to the samples its
// dictionary is trained from, when the base has none to reuse.
func (b *builder) sampleBase(r *Reader, p int) error {
	pb := b.parts[b.slot[p]]
	it, err := r.Iter(p, Range{})
	if err != nil {
		return err
	}
	for len(pb.samples) < b.sampleWant && pb.sampleSize < b.sampleBytes && it.Next() {
		v, err := it.Value()
		if err != nil {
			return err
		}
		if len(v) == 0 {
			continue
		}
		v = v[:min(len(v), dictSampleMaxLen, b.sampleBytes-pb.sampleSize)]
		pb.samples = append(pb.samples, bytes.Clone(v))
		pb.sampleSize += len(v)
	}
	return it.Err()
}

// presentIn returns alt if a presharded base holds k in its alternate
// partition alt (sequins' pathological keys live in their file's
// partition), else p. A base not holding alt cannot tell: p.
func (b *builder) presentIn(k []byte, p, alt int) int {
	if _, err := b.spec.Base.Get(alt, k); err == nil {
		return alt
	}
	return p
}
