package blocks

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/spangledb/spangle/blocks/seqfile"
)

// load reads every file with MaxParallelLoads goroutines, partitioning
// records as they are read.
func (b *builder) load(ctx context.Context) error {
	b.filesTotal.Store(int64(len(b.spec.Files)))
	total := int64(0)
	for _, f := range b.spec.Files {
		if f.Size < 0 {
			total = -1
			break
		}
		total += f.Size
	}
	b.bytesTotal.Store(total)
	files := make([]int, len(b.spec.Files))
	for i := range files {
		files[i] = i
	}
	return b.loadFiles(ctx, files, nil)
}

// loadFiles reads files fully. filePart, if not nil, gives each presharded
// file's partition, against which its keys are checked.
func (b *builder) loadFiles(ctx context.Context, files []int, filePart []int) error {
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

// openFile opens file i and reads its header.
func (b *builder) openFile(ctx context.Context, i int, count *atomic.Int64) (*seqfile.Reader, io.Closer, error) {
	f := b.spec.Files[i]
	rc, err := f.Open(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", f.Name, err)
	}
	var r io.Reader = rc
	if count != nil {
		r = &countingReader{r: rc, n: count}
	}
	sr, err := seqfile.NewReader(r, f.Name)
	if err != nil {
		_ = rc.Close()
		return nil, nil, err
	}
	return sr, rc, nil
}

// checkEvery is how many records pass between checks of the context.
const checkEvery = 4096

// loadFile reads file i fully into l. filePart >= 0 is the partition of a
// presharded file: every key must belong to it, and is stored in it.
func (b *builder) loadFile(ctx context.Context, l *loader, i int, filePart int) error {
	name := b.spec.Files[i].Name
	r, c, err := b.openFile(ctx, i, &b.bytesRead)
	if err != nil {
		return err
	}
	defer c.Close()
	l.startFile(i)
	part := b.spec.Partitioner
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
		p, alt, err := part.Partition(k, b.n)
		if err != nil {
			return fmt.Errorf("partitioner: %s: record %d at offset %d: %w", name, rec, off, err)
		}
		if p < 0 || p >= b.n || alt < 0 || alt >= b.n {
			return fmt.Errorf("%w: partitioner returned %d (alternate %d) for %d partitions: %s: record %d at offset %d",
				ErrBadInput, p, alt, b.n, name, rec, off)
		}
		if filePart >= 0 {
			if p != filePart && alt != filePart {
				return &MisplacedKeyError{File: name, Record: rec, Offset: off, Key: append([]byte(nil), k...),
					Partition: p, Alternate: alt, FilePartition: filePart}
			}
			p = filePart // a pathological key lives in its alternate's file
		}
		if s := b.slot[p]; s >= 0 {
			if len(k) == 0 || len(k) > maxKeySize || len(v) > maxValueSize {
				return fmt.Errorf("%w: %s: record %d at offset %d: key of %d bytes, value of %d (bbolt stores keys of 1 to %d bytes)",
					ErrBadInput, name, rec, off, len(k), len(v), maxKeySize)
			}
			if err := l.add(int(s), uint64(rec), k, v); err != nil {
				return err
			}
		}
		rec++
		off = r.Offset()
	}
	if err := r.Err(); err != nil {
		return err
	}
	l.endFile()
	b.records.Add(rec - reported)
	b.files[i].Records = rec
	if b.files[i].Size < 0 {
		b.files[i].Size = off
	}
	b.filesDone.Add(1)
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
	total := int64(0)
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
			if size := b.spec.Files[i].Size; size >= 0 && total >= 0 {
				total += size
			} else {
				total = -1
			}
		}
	}
	b.filesTotal.Store(int64(len(files)))
	b.bytesTotal.Store(total)
	return b.loadFiles(ctx, files, filePart)
}

// probe returns the partition of presharded file i: that of its first
// record, -1 if it has none. A first key whose alternate partition differs
// leaves two candidates; the next keys decide (sequins accepts a key in
// its alternate partition's file). If none does, the key's own partition
// wins, as in sequins.
func (b *builder) probe(ctx context.Context, i int) (int, error) {
	name := b.spec.Files[i].Name
	r, c, err := b.openFile(ctx, i, nil)
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
