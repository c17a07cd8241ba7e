package blocks

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// A spill file holds one sorted run per partition that had sealed chunks
// when the memory budget was reached, one after the other. A run's record is
//
//	uvarint(len(key)) uvarint(len(value)) uvarint(sequence) key value
//
// Spill files live in the version directory with the temporary suffix and
// are deleted when the build ends (or by OpenStore after a crash).
type run struct {
	f         *os.File
	off, size int64
}

const spillBufferSize = 1 << 20

// spill writes every sealed chunk as sorted runs to a new spill file and
// returns the bytes of chunk memory and the records freed. Called by
// memory.reserve, one at a time.
func (b *builder) spill() (freed, recs int64, err error) {
	name := filepath.Join(b.dir, fmt.Sprintf("spill-%04d%s", len(b.spills), tmpSuffix))
	f, err := os.Create(name)
	if err != nil {
		return 0, 0, err
	}
	b.spills = append(b.spills, f) // closed and removed by the build
	w := bufio.NewWriterSize(f, spillBufferSize)
	var off int64
	var hdr [3 * binary.MaxVarintLen64]byte
	for _, pb := range b.parts {
		chunks, size, n := pb.take()
		if len(chunks) == 0 {
			continue
		}
		s := sortChunks(chunks, b.delFrom)
		if s.conflict != nil {
			return freed, recs, conflictError(s.conflict)
		}
		b.sample(pb, s)
		start := off
		for _, e := range s.entries {
			k, v := s.kv(e)
			h := binary.PutUvarint(hdr[:], uint64(len(k)))
			h += binary.PutUvarint(hdr[h:], uint64(len(v)))
			h += binary.PutUvarint(hdr[h:], e.seq)
			// bufio.Writer errors are sticky: Flush reports them.
			_, _ = w.Write(hdr[:h])
			_, _ = w.Write(k)
			_, _ = w.Write(v)
			off += int64(h + len(k) + len(v))
		}
		pb.runs = append(pb.runs, run{f: f, off: start, size: off - start})
		freed += size
		recs += n
	}
	if err := w.Flush(); err != nil {
		return freed, recs, fmt.Errorf("spill: %w", err)
	}
	b.log.Debug("blocks: spilled", "db", b.spec.DB, "version", b.spec.Version, "file", filepath.Base(name), "bytes", off, "freed", freed)
	return freed, recs, nil
}

// runIter reads a run back.
type runIter struct {
	r      *bufio.Reader
	k, v   []byte
	s      uint64
	failed error
}

func newRunIter(r run) *runIter {
	return &runIter{r: bufio.NewReaderSize(io.NewSectionReader(r.f, r.off, r.size), 64<<10)}
}

func (it *runIter) next() bool {
	if it.failed != nil {
		return false
	}
	klen, err := binary.ReadUvarint(it.r)
	if err == io.EOF {
		return false
	}
	var vlen uint64
	if err == nil {
		vlen, err = binary.ReadUvarint(it.r)
	}
	if err == nil {
		it.s, err = binary.ReadUvarint(it.r)
	}
	if err == nil && (klen > maxKeySize || vlen > maxValueSize) {
		err = fmt.Errorf("%w: spill file: record too large", ErrCorrupt)
	}
	if err == nil {
		it.k = grow(it.k, int(klen))
		_, err = io.ReadFull(it.r, it.k)
	}
	if err == nil {
		it.v = grow(it.v, int(vlen))
		_, err = io.ReadFull(it.r, it.v)
	}
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		it.failed = fmt.Errorf("read spill file: %w", err)
		return false
	}
	return true
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n, max(n, 2*cap(b)))
	}
	return b[:n]
}

func (it *runIter) key() []byte   { return it.k }
func (it *runIter) value() []byte { return it.v }
func (it *runIter) seq() uint64   { return it.s }
func (it *runIter) err() error    { return it.failed }
