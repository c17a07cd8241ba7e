package blocks

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"time"

	"github.com/spangledb/spangle/blocks/sparkey"
)

// Sparkey input as sequins takes it, a partition's logs each sorted and of
// disjoint key ranges, is written straight from the logs into the
// partition's file: no chunks, no index, no sort. Each key is checked
// against its log's partition and against the key before it; a partition
// whose keys, its logs taken in the order of their first keys, are not in
// strictly increasing order (a log not sorted, a key twice, ranges that
// overlap) is loaded and sorted as other input is. A compression that
// trains a dictionary (s2, zstd) has its sample of values read first, in
// a pass over the logs of its own.

// errUnsorted: a streamed partition's keys are not in strictly increasing
// order.
var errUnsorted = errors.New("sparkey logs not in key order")

// streamsSparkey reports whether the build streams its Sparkey logs: not
// for batched partitioners, whose calls cost too much one key at a time.
func (b *builder) streamsSparkey() bool {
	if b.sparkey == nil {
		return false
	}
	bp, ok := b.spec.Partitioner.(BatchPartitioner)
	return !ok || !bp.Batched()
}

// streamSparkey writes each held partition from its logs, and the
// partitions found out of order as other input is written.
func (b *builder) streamSparkey(ctx context.Context) ([]PartitionInfo, error) {
	l := b.sparkey
	logs := make([][]int, len(b.parts)) // by slot
	var files []int
	for _, i := range l.logs {
		if s := b.slot[l.part[i]]; s >= 0 {
			logs[s] = append(logs[s], i)
			files = append(files, i)
		}
	}
	b.setTotals(files)
	sizes := make([]int64, len(b.parts))
	for s, fs := range logs {
		for _, i := range fs {
			sizes[s] += max(b.spec.Files[i].Size, 0)
		}
	}
	start := time.Now()
	unsorted := make([]bool, len(b.parts))
	infos, err := b.writeWith(ctx, sizes, func(ctx context.Context, slot int) (partWriter, PartitionInfo, error) {
		w, info, err := b.streamPartition(ctx, slot, logs[slot])
		if errors.Is(err, errUnsorted) {
			unsorted[slot] = true
			return nil, info, nil
		}
		return w, info, err
	})
	b.writeTime = time.Since(start)
	if err != nil {
		return nil, err
	}
	var rest []int
	out := infos[:0]
	for s, info := range infos {
		if unsorted[s] {
			rest = append(rest, b.parts[s].p)
			continue
		}
		out = append(out, info)
	}
	if len(rest) == 0 {
		return out, nil
	}
	b.log.Info("blocks: Sparkey logs not in key order: sorting their partitions", "db", b.spec.DB, "version", b.spec.Version, "partitions", rest)
	b.setParts(rest)
	more, err := b.loadAndWrite(ctx)
	if err != nil {
		return nil, err
	}
	out = append(out, more...)
	slices.SortFunc(out, func(x, y PartitionInfo) int { return cmp.Compare(x.Partition, y.Partition) })
	return out, nil
}

// streamPartition writes slot's partition from its logs, holding a load
// slot while it reads them. errUnsorted, with nothing written and the
// progress it counted taken back, when they are not in order.
func (b *builder) streamPartition(ctx context.Context, slot int, logs []int) (partWriter, PartitionInfo, error) {
	pb := b.parts[slot]
	select {
	case b.loadSlots <- struct{}{}:
	case <-ctx.Done():
		return nil, PartitionInfo{Partition: pb.p}, ctx.Err()
	}
	defer func() { <-b.loadSlots }()
	st := &sparkeyStream{b: b, ctx: ctx, p: pb.p}
	defer st.close()
	expect, err := st.order(logs)
	if err == nil && b.sampleWant > 0 {
		pb.samples, err = b.sampleLogs(ctx, st.logs)
	}
	if err != nil {
		return nil, PartitionInfo{Partition: pb.p}, err
	}
	w, info, err := b.writeRecords(ctx, pb, st, nil, nil, expect)
	switch {
	case errors.Is(err, errUnsorted):
		st.undo()
	case err == nil:
		b.streamed.Add(1)
	}
	return w, info, err
}

// sampleLogs reads logs once to sample their values for a compression's
// dictionary as sortedRecs.sample does: up to sampleWant values evenly
// spread over the records, sampleBytes in all, each cut to
// dictSampleMaxLen.
func (b *builder) sampleLogs(ctx context.Context, logs []int) ([][]byte, error) {
	var total uint64
	for _, i := range logs {
		r, c, err := b.openInput(ctx, i, nil)
		if err != nil {
			return nil, err
		}
		total += r.(*sparkey.Reader).Header().Puts
		_ = c.Close()
	}
	step := max(total/uint64(b.sampleWant), 1)
	var out [][]byte
	size, n := 0, uint64(0)
	for _, i := range logs {
		r, c, err := b.openInput(ctx, i, nil)
		if err != nil {
			return nil, err
		}
		for ; len(out) < b.sampleWant && size < b.sampleBytes && r.Next(); n++ {
			if n%checkEvery == 0 && ctx.Err() != nil {
				break
			}
			if v := r.Value(); n%step == 0 && len(v) > 0 {
				v = v[:min(len(v), dictSampleMaxLen, b.sampleBytes-size)]
				out = append(out, bytes.Clone(v))
				size += len(v)
			}
		}
		err = cmp.Or(r.Err(), ctx.Err())
		_ = c.Close()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sparkeyStream is a recordIter over the logs of one partition, one after
// another, checking each key's partition and order.
type sparkeyStream struct {
	b   *builder
	ctx context.Context
	p   int
	// logs are the files to read, in the order of their first keys;
	// nextLog is the next one to open.
	logs    []int
	nextLog int

	file int // the open log, if r is not nil
	r    recordReader
	c    io.Closer
	rec  int64 // records read of the open log

	prev   []byte // the last key returned, for order
	k, v   []byte
	failed error

	// Progress counted, taken back if the partition is sorted instead.
	read                  atomic.Int64 // bytes read of the logs
	bytes, records, files int64        // added to the build's counters
	recsReported          int64        // of the open log's records
}

// order sets the logs to read in the order of their first keys (one log
// is opened, the first key of several is read) and returns their data
// bytes.
func (st *sparkeyStream) order(logs []int) (expect int64, err error) {
	if len(logs) == 1 {
		st.logs = logs
		if err := st.open(); err != nil {
			return 0, err
		}
		return int64(st.r.(*sparkey.Reader).Header().DataEnd), nil
	}
	first := make(map[int][]byte, len(logs))
	for _, i := range logs {
		var read atomic.Int64
		r, c, err := st.b.openInput(st.ctx, i, &read)
		if err != nil {
			return 0, err
		}
		expect += int64(r.(*sparkey.Reader).Header().DataEnd)
		if r.Next() {
			if err = storable(st.b.spec.Files[i].Name, r.Key(), r.Value(), 0, 0); err == nil {
				first[i] = bytes.Clone(r.Key())
			}
		}
		err = cmp.Or(err, r.Err())
		_ = c.Close()
		if err != nil {
			return 0, err
		}
		if first[i] == nil {
			st.read.Add(read.Load())
			st.b.files[i].Records = 0 // empty: not read again
			st.b.filesDone.Add(1)
			st.files++
			continue
		}
		st.logs = append(st.logs, i)
	}
	slices.SortStableFunc(st.logs, func(x, y int) int { return bytes.Compare(first[x], first[y]) })
	return expect, nil
}

// open opens the next log.
func (st *sparkeyStream) open() error {
	i := st.logs[st.nextLog]
	r, c, err := st.b.openInput(st.ctx, i, &st.read)
	if err != nil {
		return err
	}
	st.nextLog++
	st.file, st.r, st.c, st.rec, st.recsReported = i, r, c, 0, 0
	return nil
}

// report adds the records and bytes read since the last report to the
// build's progress.
func (st *sparkeyStream) report() {
	b := st.b
	b.records.Add(st.rec - st.recsReported)
	st.records += st.rec - st.recsReported
	st.recsReported = st.rec
	n := st.read.Load()
	b.bytesRead.Add(n - st.bytes)
	st.bytes = n
}

// undo takes back the progress the stream counted.
func (st *sparkeyStream) undo() {
	st.report()
	b := st.b
	b.records.Add(-st.records)
	b.bytesRead.Add(-st.bytes)
	b.filesDone.Add(-st.files)
}

func (st *sparkeyStream) close() {
	if st.c != nil {
		_ = st.c.Close()
		st.r, st.c = nil, nil
	}
}

func (st *sparkeyStream) fail(err error) bool {
	st.failed = err
	st.close()
	return false
}

func (st *sparkeyStream) next() bool {
	b := st.b
	for st.failed == nil {
		if st.r == nil {
			if st.nextLog == len(st.logs) {
				return false
			}
			if err := st.open(); err != nil {
				return st.fail(err)
			}
		}
		name := b.spec.Files[st.file].Name
		if !st.r.Next() {
			if err := st.r.Err(); err != nil {
				return st.fail(err)
			}
			st.report()
			b.files[st.file].Records = st.rec
			b.filesDone.Add(1)
			st.files++
			st.close()
			continue
		}
		rec := st.rec
		if rec%checkEvery == 0 {
			if err := st.ctx.Err(); err != nil {
				return st.fail(err)
			}
			st.report()
		}
		if rec >= maxRecords {
			return st.fail(fmt.Errorf("%w: %s: more than %d records", ErrBadInput, name, int64(maxRecords)))
		}
		k, v := st.r.Key(), st.r.Value()
		p, alt, err := b.spec.Partitioner.Partition(k, b.n)
		if err != nil {
			return st.fail(fmt.Errorf("partitioner: %s: record %d at offset %d: %w", name, rec, rec, err))
		}
		if _, err := b.placed(name, st.p, k, p, alt, rec, rec); err != nil {
			return st.fail(err)
		}
		if err := storable(name, k, v, rec, rec); err != nil {
			return st.fail(err)
		}
		if st.prev != nil && bytes.Compare(k, st.prev) <= 0 {
			return st.fail(errUnsorted)
		}
		st.prev = append(st.prev[:0], k...)
		st.k, st.v = k, v
		st.rec++
		return true
	}
	return false
}

func (st *sparkeyStream) key() []byte   { return st.k }
func (st *sparkeyStream) value() []byte { return st.v }
func (st *sparkeyStream) seq() uint64   { return seqOf(uint32(st.file), uint64(st.rec-1)) }
func (st *sparkeyStream) err() error    { return st.failed }
