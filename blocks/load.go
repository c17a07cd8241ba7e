package blocks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/spangledb/spangle/blocks/seqfile"
)

// load reads every file with MaxParallelLoads goroutines, partitioning
// records as they are read.
func (b *builder) load(ctx context.Context) error {
	files := make([]int, len(b.spec.Files))
	for i := range files {
		files[i] = i
	}
	return b.loadFiles(ctx, files, nil)
}

// loadFiles reads files fully, after setting the progress totals from
// them unless they are set. filePart, if not nil, gives
// each presharded file's partition, against which its keys are checked.
func (b *builder) loadFiles(ctx context.Context, files []int, filePart []int) error {
	if !b.totalsSet {
		b.setTotals(files)
	}
	g, ctx := errgroup.WithContext(ctx)
	var next atomic.Int64
	for range min(b.opts.MaxParallelLoads, len(files)) {
		g.Go(func() error {
			l := newLoader(b.parts, b.mem, b.chunkSize)
			defer l.close()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(files) {
					return nil
				}
				fp := -1
				if filePart != nil {
					fp = filePart[files[i]]
				}
				select {
				case b.loadSlots <- struct{}{}:
				case <-ctx.Done():
					return ctx.Err()
				}
				err := b.loadFile(ctx, l, files[i], fp)
				<-b.loadSlots
				if err != nil {
					return err
				}
			}
		})
	}
	return g.Wait()
}

// setTotals sets the progress totals from the files a build reads (bytes
// unknown if one file's size is).
func (b *builder) setTotals(files []int) {
	total := int64(0)
	for _, i := range files {
		if size := b.spec.Files[i].Size; size >= 0 && total >= 0 {
			total += size
		} else {
			total = -1
		}
	}
	b.filesTotal.Store(int64(len(files)))
	b.bytesTotal.Store(total)
	b.totalsSet = true
}

// seqfileOptions bound the decompressed bytes of the SequenceFiles read
// at once, over all builds, by the memory budget: a record-compressed
// value of 200 MiB takes 207 KB in its file, and four such files loaded
// at once took 1.28 GB. Each load decompresses up to its share of half
// the budget (half over MaxParallelLoads) on its own; beyond it, one load
// at a time (the store's bigRecords) may decompress up to the other half,
// the largest record a build accepts: a larger one fails the build,
// naming its file.
func (b *builder) seqfileOptions(ctx context.Context) seqfile.ReaderOptions {
	half := int(min(b.opts.MemoryBudget/2, math.MaxInt32))
	return seqfile.ReaderOptions{
		MaxSize: half,
		Share:   half / max(b.opts.MaxParallelLoads, 1),
		Gate:    slotGate{ctx: ctx, slot: b.bigRecords},
	}
}

// slotGate is a seqfile.Gate over a channel of one slot.
type slotGate struct {
	ctx  context.Context
	slot chan struct{}
}

func (g slotGate) Enter() error {
	select {
	case g.slot <- struct{}{}:
		return nil
	case <-g.ctx.Done():
		return g.ctx.Err()
	}
}

func (g slotGate) Leave() { <-g.slot }

// releaseCloser closes a SequenceFile: its Reader leaves the gate, then
// the file closes.
type releaseCloser struct {
	r *seqfile.Reader
	c io.Closer
}

func (rc releaseCloser) Close() error {
	rc.r.Release()
	return rc.c.Close()
}

// countingReader counts bytes read into a build's progress.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// checkEvery is how many records pass between checks of the context.
const checkEvery = 4096

// BatchPartitioner is a Partitioner that also places many keys per call:
// Wasm modules with a batch export, for which one call costs far more than
// a key of a batch.
// Builds use PartitionBatch when Batched reports true.
type BatchPartitioner interface {
	Partitioner
	Batched() bool
	// PartitionBatch writes the partition of keys[i] to out[i]; the
	// alternate partition of each is the partition itself.
	PartitionBatch(keys [][]byte, n int, out []int) error
}

// partitionBatchSize is how many records a batched build partitions per
// call.
const partitionBatchSize = 256

// recordBatch holds copies of records waiting for a batch partitioning.
type recordBatch struct {
	buf        []byte  // keys and values, back to back
	klen, vlen []int   // by record
	recs, offs []int64 // by record: number and offset in the file
	keys, vals [][]byte
	parts      []int
}

func (rb *recordBatch) len() int { return len(rb.recs) }

func (rb *recordBatch) add(k, v []byte, rec, off int64) {
	rb.buf = append(append(rb.buf, k...), v...)
	rb.klen, rb.vlen = append(rb.klen, len(k)), append(rb.vlen, len(v))
	rb.recs, rb.offs = append(rb.recs, rec), append(rb.offs, off)
}

// slice sets keys and vals to point into buf, once no record is added.
func (rb *recordBatch) slice() {
	rb.keys, rb.vals = rb.keys[:0], rb.vals[:0]
	pos := 0
	for i, kl := range rb.klen {
		vl := rb.vlen[i]
		rb.keys = append(rb.keys, rb.buf[pos:pos+kl:pos+kl])
		rb.vals = append(rb.vals, rb.buf[pos+kl:pos+kl+vl:pos+kl+vl])
		pos += kl + vl
	}
}

func (rb *recordBatch) reset() {
	rb.buf, rb.klen, rb.vlen = rb.buf[:0], rb.klen[:0], rb.vlen[:0]
	rb.recs, rb.offs = rb.recs[:0], rb.offs[:0]
}

// loadFile reads file i fully into l. filePart >= 0 is the partition of a
// presharded file: every key must belong to it, and is stored in it.
func (b *builder) loadFile(ctx context.Context, l *loader, i int, filePart int) error {
	name := b.spec.Files[i].Name
	r, c, err := b.openInput(ctx, i, &b.bytesRead)
	if err != nil {
		return err
	}
	defer c.Close()
	l.startFile(i)
	part := b.spec.Partitioner
	var batch *recordBatch
	if bp, ok := part.(BatchPartitioner); ok && bp.Batched() {
		batch = &recordBatch{parts: make([]int, partitionBatchSize)}
	}
	flush := func() error {
		if batch == nil || batch.len() == 0 {
			return nil
		}
		batch.slice()
		out := batch.parts[:batch.len()]
		if err := part.(BatchPartitioner).PartitionBatch(batch.keys, b.n, out); err != nil {
			return fmt.Errorf("partitioner: %s: records %d to %d: %w", name, batch.recs[0], batch.recs[len(batch.recs)-1], err)
		}
		for j, p := range out {
			if err := b.place(l, name, filePart, batch.keys[j], batch.vals[j], p, p, batch.recs[j], batch.offs[j]); err != nil {
				return err
			}
		}
		batch.reset()
		return nil
	}
	var rec, reported int64
	off := r.Offset()
	for r.Next() {
		if rec%checkEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			b.records.Add(rec - reported)
			reported = rec
		}
		if rec >= maxRecords {
			return fmt.Errorf("%w: %s: more than %d records", ErrBadInput, name, int64(maxRecords))
		}
		k, v := r.Key(), r.Value()
		if batch != nil {
			batch.add(k, v, rec, off)
			if batch.len() == partitionBatchSize {
				if err := flush(); err != nil {
					return err
				}
			}
		} else {
			p, alt, err := part.Partition(k, b.n)
			if err != nil {
				return fmt.Errorf("partitioner: %s: record %d at offset %d: %w", name, rec, off, err)
			}
			if err := b.place(l, name, filePart, k, v, p, alt, rec, off); err != nil {
				return err
			}
		}
		rec++
		off = r.Offset()
	}
	if err := r.Err(); err != nil {
		if errors.Is(err, seqfile.ErrTooLarge) {
			return fmt.Errorf("%w (a record may take at most half the build's memory budget, %d bytes: raise it to load this file)", err, b.opts.MemoryBudget)
		}
		return err
	}
	if err := flush(); err != nil {
		return err
	}
	l.endFile()
	b.records.Add(rec - reported)
	b.files[i].Records = rec
	if _, ok := r.(*seqfile.Reader); ok && b.files[i].Size < 0 {
		b.files[i].Size = off
	}
	b.filesDone.Add(1)
	return nil
}

// place checks a record's partition and keeps it if it is held here.
func (b *builder) place(l *loader, name string, filePart int, k, v []byte, p, alt int, rec, off int64) error {
	p, err := b.placed(name, filePart, k, p, alt, rec, off)
	if err != nil {
		return err
	}
	if s := b.slot[p]; s >= 0 {
		if err := storable(name, k, v, rec, off); err != nil {
			return err
		}
		return l.add(int(s), uint64(rec), k, v)
	}
	return nil
}

// placed checks the partition p (alternate alt) the partitioner gave a
// record and returns the partition it is stored in: filePart, if at least
// 0, for a file of one partition, whose every key must belong to it.
func (b *builder) placed(name string, filePart int, k []byte, p, alt int, rec, off int64) (int, error) {
	if p < 0 || p >= b.n || alt < 0 || alt >= b.n {
		return 0, fmt.Errorf("%w: partitioner returned %d (alternate %d) for %d partitions: %s: record %d at offset %d",
			ErrBadInput, p, alt, b.n, name, rec, off)
	}
	if filePart >= 0 {
		if p != filePart && alt != filePart {
			return 0, &MisplacedKeyError{File: name, Record: rec, Offset: off, Key: append([]byte(nil), k...),
				Partition: p, Alternate: alt, FilePartition: filePart}
		}
		return filePart, nil // a pathological key lives in its alternate's file
	}
	if alt != p && b.spec.Base != nil && b.spec.Base.Manifest().Presharded {
		return b.presentIn(k, p, alt), nil // where the presharded base put it
	}
	return p, nil
}

// storable checks that bbolt can store a record.
func storable(name string, k, v []byte, rec, off int64) error {
	if len(k) == 0 || len(k) > maxKeySize || len(v) > maxValueSize {
		return fmt.Errorf("%w: %s: record %d at offset %d: key of %d bytes, value of %d (bbolt stores keys of 1 to %d bytes)",
			ErrBadInput, name, rec, off, len(k), len(v), maxKeySize)
	}
	return nil
}

// loadPresharded finds each file's partition from its first records, then
// reads the files of held partitions.
func (b *builder) loadPresharded(ctx context.Context) error {
	filePart := make([]int, len(b.spec.Files))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(b.opts.MaxParallelLoads)
	for i := range b.spec.Files {
		g.Go(func() error {
			p, err := b.probe(gctx, i)
			filePart[i] = p
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	owner := make([]int, b.n)
	for i := range owner {
		owner[i] = -1
	}
	var files []int
	for i, p := range filePart {
		b.files[i].Partition = p
		if p < 0 {
			b.files[i].Records = 0
			continue
		}
		if o := owner[p]; o >= 0 {
			return fmt.Errorf("%w: presharded files %s and %s both hold partition %d",
				ErrBadInput, b.spec.Files[o].Name, b.spec.Files[i].Name, p)
		}
		owner[p] = i
		if b.slot[p] >= 0 {
			files = append(files, i)
		}
	}
	return b.loadFiles(ctx, files, filePart)
}

// probe returns the partition of presharded file i: that of its first
// record, -1 if it has none. A first key whose alternate partition differs
// leaves two candidates; the next keys decide (sequins accepts a key in
// its alternate partition's file). If none does, the key's own partition
// wins, as in sequins.
func (b *builder) probe(ctx context.Context, i int) (int, error) {
	name := b.spec.Files[i].Name
	r, c, err := b.openInput(ctx, i, nil)
	if err != nil {
		return -1, err
	}
	defer c.Close()
	first, second := -1, -1 // candidates
	off := r.Offset()
	for rec := int64(0); r.Next(); rec, off = rec+1, r.Offset() {
		if rec%checkEvery == 0 {
			if err := ctx.Err(); err != nil {
				return -1, err
			}
		}
		p, alt, err := b.spec.Partitioner.Partition(r.Key(), b.n)
		if err != nil {
			return -1, fmt.Errorf("partitioner: %s: record %d: %w", name, rec, err)
		}
		if p < 0 || p >= b.n || alt < 0 || alt >= b.n {
			return -1, fmt.Errorf("%w: partitioner returned %d (alternate %d) for %d partitions: %s: record %d",
				ErrBadInput, p, alt, b.n, name, rec)
		}
		if rec == 0 {
			first = p
			if alt == p {
				return p, nil
			}
			second = alt
			continue
		}
		switch {
		case p == first || alt == first:
			if p != second && alt != second {
				return first, nil
			}
		case p == second || alt == second:
			return second, nil
		default:
			return -1, &MisplacedKeyError{File: name, Record: rec, Offset: off, Key: append([]byte(nil), r.Key()...),
				Partition: p, Alternate: alt, FilePartition: first}
		}
	}
	if err := r.Err(); err != nil {
		return -1, err
	}
	return first, nil
}
