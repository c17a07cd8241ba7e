package blocks

import (
	"encoding/binary"
	"slices"
	"sync"
)

// Records are buffered in chunks: slabs of memory filled by one loader with
// records of one partition from one source file, so that reading needs no
// per-record allocation and no lock. A record in a chunk is
//
//	uvarint(record index in its file) uvarint(len(key)) uvarint(len(value)) key value
//
// A chunk is sealed (handed to its partition's partBuf) when full or when
// its loader finishes the file.
type chunk struct {
	file uint32 // index of the source file
	n    int    // records
	buf  []byte
}

// partBuf collects the records of one held partition during a build.
type partBuf struct {
	p int

	mu     sync.Mutex // guards chunks, bytes, recs
	chunks []*chunk   // sealed chunks in memory
	bytes  int64      // sum of cap(chunks[i].buf): what the memory budget counts
	recs   int64      // records in chunks: what sorting them indexes

	// Touched only by the spiller (one at a time) while loading, then by the
	// partition's writer.
	runs       []run    // sorted runs spilled to disk
	samples    [][]byte // values kept to train a dictionary
	sampleSize int      // bytes in samples
}

func (pb *partBuf) add(c *chunk) {
	pb.mu.Lock()
	pb.chunks = append(pb.chunks, c)
	pb.bytes += int64(cap(c.buf))
	pb.recs += int64(c.n)
	pb.mu.Unlock()
}

// take removes and returns the sealed chunks, their size and records.
func (pb *partBuf) take() ([]*chunk, int64, int64) {
	pb.mu.Lock()
	defer pb.mu.Unlock()
	c, n, r := pb.chunks, pb.bytes, pb.recs
	pb.chunks, pb.bytes, pb.recs = nil, 0, 0
	return c, n, r
}

func (pb *partBuf) records() int64 {
	pb.mu.Lock()
	defer pb.mu.Unlock()
	return pb.recs
}

// indexBytes is what sorting records costs beside them: an entry each,
// and as much again for the radix pass's output (sortedRecs.sort).
const indexBytes = 2 * 24

// memory accounts for chunk memory against the budget and decides when to
// spill. Only sealed chunks can be spilled; chunks being filled cannot.
// The budget holds the chunks and the sort index of the sealed records
// sorted at once: one partition's while loading (a spill sorts one at a
// time), the writers' largest partitions before writing (fit).
type memory struct {
	budget int64
	spill  func() (int64, int64, error) // spills every sealed chunk, returns the bytes and records freed
	parts  []*partBuf

	mu       sync.Mutex // guards used, sealed, recs, sorting, spilling
	cond     sync.Cond  // signalled when a spill ends
	used     int64      // bytes of chunks allocated and not freed
	sealed   int64      // of which sealed
	recs     int64      // records in sealed chunks
	sorting  int        // partitions sorted at once
	spilling bool
}

func newMemory(budget int64, parts []*partBuf, spill func() (int64, int64, error)) *memory {
	m := &memory{budget: budget, parts: parts, spill: spill, sorting: 1}
	m.cond.L = &m.mu
	return m
}

// over reports whether n more bytes pass the budget with the sort index
// the records in memory need. With m.mu held.
func (m *memory) over(n int64) bool {
	if m.used+n+indexBytes*m.recs <= m.budget { // the index of every record fits
		return false
	}
	if m.used+n > m.budget {
		return true
	}
	// The m.sorting largest partitions' records.
	top := make([]int64, m.sorting+1)
	for _, pb := range m.parts {
		top[0] = pb.records()
		for i := 1; i < len(top) && top[i-1] > top[i]; i++ {
			top[i-1], top[i] = top[i], top[i-1]
		}
	}
	idx := int64(0)
	for _, r := range top[1:] {
		idx += indexBytes * r
	}
	return m.used+n+idx > m.budget
}

// reserve accounts for n more bytes. Over budget, the first caller spills
// every sealed chunk while later ones wait for it.
func (m *memory) reserve(n int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for m.spilling && m.over(n) {
		m.cond.Wait()
	}
	if m.sealed > 0 && m.over(n) {
		m.spilling = true
		m.mu.Unlock()
		freed, recs, err := m.spill()
		m.mu.Lock()
		m.spilling = false
		m.cond.Broadcast()
		m.used -= freed
		m.sealed -= freed
		m.recs -= recs
		if err != nil {
			return err
		}
	}
	m.used += n
	return nil
}

// fit, once loading is done, spills if the chunks and the sort index of
// the writers' largest partitions, sorted at once, would not fit.
func (m *memory) fit(writers int) error {
	m.mu.Lock()
	m.sorting = max(writers, 1)
	m.mu.Unlock()
	return m.reserve(0)
}

// sealedAdd moves n bytes of recs records from being filled to sealed.
func (m *memory) sealedAdd(n, recs int64) {
	m.mu.Lock()
	m.sealed += n
	m.recs += recs
	m.mu.Unlock()
}

// release frees n bytes of sealed chunks holding recs records.
func (m *memory) release(n, recs int64) {
	m.mu.Lock()
	m.used -= n
	m.sealed -= n
	m.recs -= recs
	m.mu.Unlock()
}

// unreserve frees n bytes never sealed.
func (m *memory) unreserve(n int64) {
	m.mu.Lock()
	m.used -= n
	m.mu.Unlock()
}

// loader fills chunks for one reading goroutine. Not safe for concurrent
// use.
type loader struct {
	parts     []*partBuf
	mem       *memory
	chunkSize int
	file      uint32
	open      []*chunk // by slot: the chunk being filled, or nil
}

func newLoader(parts []*partBuf, mem *memory, chunkSize int) *loader {
	return &loader{parts: parts, mem: mem, chunkSize: chunkSize, open: make([]*chunk, len(parts))}
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// add copies a record of the current file into slot's chunk.
func (l *loader) add(slot int, rec uint64, key, val []byte) error {
	need := uvarintLen(rec) + uvarintLen(uint64(len(key))) + uvarintLen(uint64(len(val))) + len(key) + len(val)
	c := l.open[slot]
	if c == nil || cap(c.buf)-len(c.buf) < need {
		if c != nil {
			l.seal(slot, c)
		}
		size := max(l.chunkSize, need)
		if err := l.mem.reserve(int64(size)); err != nil {
			return err
		}
		c = &chunk{buf: make([]byte, 0, size)}
		l.open[slot] = c
	}
	if c.n == 0 {
		c.file = l.file
	}
	c.buf = binary.AppendUvarint(c.buf, rec)
	c.buf = binary.AppendUvarint(c.buf, uint64(len(key)))
	c.buf = binary.AppendUvarint(c.buf, uint64(len(val)))
	c.buf = append(c.buf, key...)
	c.buf = append(c.buf, val...)
	c.n++
	return nil
}

// seal hands c to its partition, or frees it if empty.
func (l *loader) seal(slot int, c *chunk) {
	l.open[slot] = nil
	if c.n == 0 {
		l.mem.unreserve(int64(cap(c.buf)))
		return
	}
	if free := cap(c.buf) - len(c.buf); free >= minRest { // the last records of a load: keep what they take
		c.buf = slices.Clone(c.buf)
		l.mem.unreserve(int64(free))
	}
	l.parts[slot].add(c)
	l.mem.sealedAdd(int64(cap(c.buf)), int64(c.n))
}

// minRest is the smallest rest of a chunk worth filling with the next file.
const minRest = 4 << 10

// startFile makes the next records come from file i.
func (l *loader) startFile(i int) { l.file = uint32(i) }

// endFile seals every chunk holding records of the current file: a chunk
// holds one file's records. The rest of a chunk's memory becomes a chunk for
// the next file.
func (l *loader) endFile() {
	for slot, c := range l.open {
		if c == nil || c.n == 0 {
			continue
		}
		rest := c.buf[len(c.buf):cap(c.buf)]
		c.buf = c.buf[:len(c.buf):len(c.buf)]
		l.open[slot] = nil
		l.parts[slot].add(c)
		l.mem.sealedAdd(int64(cap(c.buf)), int64(c.n))
		if cap(rest) >= minRest {
			l.open[slot] = &chunk{buf: rest[:0]}
		} else {
			l.mem.unreserve(int64(cap(rest)))
		}
	}
}

// close seals or frees every chunk.
func (l *loader) close() {
	for slot, c := range l.open {
		if c != nil {
			l.seal(slot, c)
		}
	}
}
