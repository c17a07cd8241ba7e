package blocks

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/cespare/xxhash/v2"
	"golang.org/x/sync/errgroup"
)

// checksum computes PartitionInfo.Checksum. Records are gathered in a
// buffer and hashed in blocks: many small writes to the digest cost more.
type checksum struct {
	h   *xxhash.Digest
	buf []byte
}

func newChecksum() *checksum { return &checksum{h: xxhash.New(), buf: make([]byte, 0, 64<<10)} }

func (c *checksum) add(k, v []byte) {
	if len(c.buf)+2*binary.MaxVarintLen64+len(k)+len(v) > cap(c.buf) {
		_, _ = c.h.Write(c.buf)
		c.buf = c.buf[:0]
	}
	if 2*binary.MaxVarintLen64+len(k)+len(v) > cap(c.buf) {
		c.buf = binary.AppendUvarint(c.buf, uint64(len(k)))
		_, _ = c.h.Write(c.buf)
		_, _ = c.h.Write(k)
		c.buf = binary.AppendUvarint(c.buf[:0], uint64(len(v)))
		_, _ = c.h.Write(c.buf)
		_, _ = c.h.Write(v)
		c.buf = c.buf[:0]
		return
	}
	c.buf = binary.AppendUvarint(c.buf, uint64(len(k)))
	c.buf = append(c.buf, k...)
	c.buf = binary.AppendUvarint(c.buf, uint64(len(v)))
	c.buf = append(c.buf, v...)
}

func (c *checksum) String() string {
	_, _ = c.h.Write(c.buf)
	c.buf = c.buf[:0]
	return fmt.Sprintf("xxh64:%016x", c.h.Sum64())
}

// syncWorkers is how many partition files are fsynced at once.
const syncWorkers = 4

// partWriter writes one partition's bbolt file: the data bucket's keys in
// increasing order, then the meta bucket.
type partWriter interface {
	// put stores a key and its stored value; it does not retain them.
	put(k, v []byte) error
	// finish writes the meta bucket and completes the file, unsynced.
	finish(meta map[string][]byte) error
	// syncClose fsyncs and closes the file; size is its size.
	syncClose() (size int64, err error)
	// checksum is the file's FileChecksum, computed as it was written,
	// once finish has returned; "" if it must be read back.
	checksum() string
	// abort closes the file after a failure.
	abort()
}

// write sorts and writes every held partition, MaxParallelWrites at a time,
// largest first. Files are fsynced in the background while the next
// partitions are written.
func (b *builder) write(ctx context.Context) ([]PartitionInfo, error) {
	sizes := make([]int64, len(b.parts))
	for i, pb := range b.parts {
		sizes[i] = pb.bytes
		for _, r := range pb.runs {
			sizes[i] += r.size
		}
	}
	return b.writeWith(ctx, sizes, b.writePartition)
}

// writeWith writes the partition of each slot of b.parts with writeSlot,
// MaxParallelWrites at a time, largest (by sizes) first, and fsyncs the
// files in the background while the next are written. A slot for which
// writeSlot returns no writer and no error wrote nothing: its info is
// left zero.
func (b *builder) writeWith(ctx context.Context, sizes []int64, writeSlot func(context.Context, int) (partWriter, PartitionInfo, error)) ([]PartitionInfo, error) {
	order := make([]int, len(b.parts))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(x, y int) int { return cmp.Compare(sizes[y], sizes[x]) })

	// Written files queue for fsync; the queue holds every partition, so
	// writers never wait for the disk.
	type written struct {
		slot int
		w    partWriter
		info PartitionInfo
	}
	infos := make([]PartitionInfo, len(b.parts))
	queue := make(chan written, len(b.parts))
	var syncs errgroup.Group
	for range min(syncWorkers, len(b.parts)) {
		syncs.Go(func() error {
			var first error
			for wr := range queue {
				size, err := wr.w.syncClose()
				wr.info.FileChecksum = wr.w.checksum()
				if err == nil && wr.info.FileChecksum == "" {
					// Read back from the page cache: bbolt's transactions
					// write pages out of order and in place.
					wr.info.FileChecksum, err = fileChecksum(filepath.Join(b.dir, partitionFile(wr.info.Partition)))
				}
				if err != nil && first == nil {
					first = fmt.Errorf("partition %d: %w", wr.info.Partition, err)
				}
				wr.info.StoredBytes = size
				infos[wr.slot] = wr.info
			}
			return first
		})
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(b.opts.MaxParallelWrites)
	for _, slot := range order {
		g.Go(func() error {
			w, info, err := writeSlot(ctx, slot)
			if err != nil {
				return fmt.Errorf("partition %d: %w", b.parts[slot].p, err)
			}
			if w != nil {
				queue <- written{slot, w, info}
			}
			return nil
		})
	}
	err := g.Wait()
	close(queue)
	start := time.Now()
	if serr := syncs.Wait(); err == nil {
		err = serr
	}
	b.syncTime = time.Since(start)
	if err != nil {
		return nil, err
	}
	return infos, nil
}

// writePartition merges the partition's runs and in-memory records into its
// file and returns the unsynced writer.
// blocksPageSize is the page size of CompressionS2Blocks partitions: a
// bbolt leaf page holds whole entries only, and a compressed block of
// BlockSize bytes takes over half a 4 KiB page, so that most of each
// page would stay empty; 32 KiB pages hold about 13 blocks.
const blocksPageSize = 32 << 10

// smallPartitionBytes is the record bytes below which a partition is
// written with the OS's pages whatever its compression: a bbolt file
// takes six pages at least (two metas, the freelist, the root, a leaf for
// each bucket), 192 KiB with blocksPageSize, so that 3.5 KB of records
// over 20 partitions took 3.9 MB. Below it, 4 KiB pages hold the blocks
// in less room than the six large pages would.
const smallPartitionBytes = 4 * blocksPageSize

// pageSizeFor is the page size of a partition stored with c, of about
// expect record bytes (0: the OS's).
func pageSizeFor(c Compression, expect int64) int {
	if c == CompressionS2Blocks && expect >= smallPartitionBytes {
		return blocksPageSize
	}
	return 0
}

func (b *builder) writePartition(ctx context.Context, slot int) (w partWriter, info PartitionInfo, err error) {
	pb := b.parts[slot]
	chunks, memBytes, memRecs := pb.take()
	mem := sortChunks(chunks, b.delFrom)
	defer func() {
		// Free the chunks as soon as the partition is written.
		mem.chunks, mem.entries = nil, nil
		b.mem.release(memBytes, memRecs)
	}()
	if mem.conflict != nil {
		return nil, PartitionInfo{Partition: pb.p}, conflictError(mem.conflict)
	}
	b.sample(pb, mem)

	var it recordIter = &memIter{s: mem}
	var expect int64 = memBytes
	if len(pb.runs) > 0 {
		its := []recordIter{it}
		for _, r := range pb.runs {
			its = append(its, newRunIter(r))
			expect += r.size
		}
		it = newMergeIter(its, b.delFrom)
	}
	err = b.withBase(ctx, pb.p, it, func(it recordIter, dict []byte, base *PartitionInfo) error {
		if base != nil {
			expect += base.Bytes
		}
		if bm, ok := it.(*blockMerge); ok {
			w, info, err = b.writeBlockMerge(ctx, pb, bm, base, expect)
			return err
		}
		w, info, err = b.writeRecords(ctx, pb, it, dict, base, expect)
		return err
	})
	return w, info, err
}

// newWriter starts partition p's file, of about expect record bytes.
func (b *builder) newWriter(p int, expect int64) (partWriter, error) {
	path := filepath.Join(b.dir, partitionFile(p))
	if b.opts.TxWrites {
		return newTxWriter(path, b.opts.BatchSize, expect)
	}
	return newPackWriter(path, pageSizeFor(b.comp, expect))
}

// writeRecords writes partition pb's file from it, with the dictionary
// dict if not nil, else one trained from pb's samples. base is the base
// partition's info when it merges a delta into one.
func (b *builder) writeRecords(ctx context.Context, pb *partBuf, it recordIter, dict []byte, base *PartitionInfo, expect int64) (partWriter, PartitionInfo, error) {
	info := PartitionInfo{Partition: pb.p}
	var enc *valueEncoder
	var meta map[string][]byte
	var err error
	if dict != nil {
		enc, meta, err = encoderWithDict(b.comp, pb.p, dict)
	} else {
		enc, meta, err = newValueEncoder(b.comp, pb.p, pb.samples)
	}
	if err != nil {
		return nil, info, err
	}
	defer enc.close()
	pb.samples = nil

	w, err := b.newWriter(pb.p, expect)
	if err != nil {
		return nil, info, err
	}
	sum := newChecksum()
	var dg Digester
	var blocks *blockPacker // CompressionS2Blocks: records go in blocks
	if b.comp == CompressionS2Blocks {
		blocks = &blockPacker{}
	}
	// A raw merge copies the base's unchanged values as stored: its
	// digest and bytes follow from the base's, and it has no checksum.
	raw, _ := it.(*baseMerge)
	if raw != nil && !raw.raw {
		raw = nil
	}
	for it.next() {
		k, v := it.key(), it.value()
		if info.Records%(16*checkEvery) == 0 {
			if err := ctx.Err(); err != nil {
				w.abort()
				return nil, info, err
			}
		}
		var sk, sv []byte // what to store now: nil while a block fills
		switch {
		case raw != nil && raw.stored:
			sk, sv = k, v
		case raw != nil:
			sk, sv = k, enc.encode(v)
		default:
			sum.add(k, v)
			dg.Add(k, v)
			info.Bytes += int64(len(k) + len(v))
			if blocks != nil {
				sk, sv = blocks.add(k, v)
			} else {
				sk, sv = k, enc.encode(v)
			}
		}
		if sk != nil {
			if err := w.put(sk, sv); err != nil {
				w.abort()
				return nil, info, err
			}
		}
		info.Records++
	}
	if err := it.err(); err != nil {
		w.abort()
		return nil, info, err
	}
	if blocks != nil {
		if sk, sv := blocks.flush(); sk != nil {
			if err := w.put(sk, sv); err != nil {
				w.abort()
				return nil, info, err
			}
		}
		meta[metaLayout] = []byte(layoutBlocks)
		meta[metaBlockMax] = []byte(strconv.Itoa(blocks.max))
	}
	if raw != nil {
		var err error
		if info.Digest, info.Bytes, err = raw.result(base); err == nil {
			if d, _ := ParseDigest(info.Digest); d.Records != info.Records {
				err = fmt.Errorf("%w: base %s partition %d: its digest counts %d records, the merge wrote %d",
					ErrCorrupt, b.spec.Base.Manifest().Version, pb.p, d.Records, info.Records)
			}
		}
		if err != nil {
			w.abort()
			return nil, info, err
		}
	} else {
		info.Checksum = sum.String()
		info.Digest = dg.Digest.String()
	}
	if blocks != nil {
		meta[metaFormat] = []byte(strconv.Itoa(blocksFormat))
	} else {
		meta[metaFormat] = []byte(strconv.Itoa(partitionFormat))
	}
	meta[metaPartition] = []byte(strconv.Itoa(pb.p))
	meta[metaRecords] = []byte(strconv.FormatInt(info.Records, 10))
	meta[metaChecksum] = []byte(info.Checksum)
	if err := w.finish(meta); err != nil {
		w.abort()
		return nil, info, err
	}
	return w, info, nil
}
