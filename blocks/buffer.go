package blocks

import (
	"encoding/binary"
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

	mu     sync.Mutex // guards chunks, bytes
	chunks []*chunk   // sealed chunks in memory
	bytes  int64      // sum of cap(chunks[i].buf): what the memory budget counts

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
	pb.mu.Unlock()
}

// take removes and returns the sealed chunks and their size.
func (pb *partBuf) take() ([]*chunk, int64) {
	pb.mu.Lock()
	defer pb.mu.Unlock()
	c, n := pb.chunks, pb.bytes
	pb.chunks, pb.bytes = nil, 0
	return c, n
}

// memory accounts for chunk memory against the budget and decides when to
// spill. Only sealed chunks can be spilled; chunks being filled cannot.
type memory struct {
	budget int64
	spill  func() (int64, error) // spills every sealed chunk, returns the bytes freed

	mu       sync.Mutex // guards used, sealed, spilling
	cond     sync.Cond  // signalled when a spill ends
	used     int64      // bytes of chunks allocated and not freed
	sealed   int64      // of which sealed
	spilling bool
}

func newMemory(budget int64, spill func() (int64, error)) *memory {
	m := &memory{budget: budget, spill: spill}
	m.cond.L = &m.mu
	return m
}

// reserve accounts for n more bytes. Over budget, the first caller spills
// every sealed chunk while later ones wait for it.
func (m *memory) reserve(n int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for m.used+n > m.budget && m.spilling {
		m.cond.Wait()
	}
	if m.used+n > m.budget && m.sealed > 0 {
		m.spilling = true
		m.mu.Unlock()
		freed, err := m.spill()
		m.mu.Lock()
		m.spilling = false
		m.cond.Broadcast()
		m.used -= freed
		m.sealed -= freed
		if err != nil {
			return err
		}
	}
	m.used += n
	return nil
}

// sealedAdd moves n bytes from being filled to sealed.
func (m *memory) sealedAdd(n int64) {
	m.mu.Lock()
	m.sealed += n
	m.mu.Unlock()
}

// release frees n bytes; sealed says whether they were sealed.
func (m *memory) release(n int64, sealed bool) {
	m.mu.Lock()
	m.used -= n
	if sealed {
		m.sealed -= n
	}
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
		l.mem.release(int64(cap(c.buf)), false)
		return
	}
	l.parts[slot].add(c)
	l.mem.sealedAdd(int64(cap(c.buf)))
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
		l.mem.sealedAdd(int64(cap(c.buf)))
		if cap(rest) >= minRest {
			l.open[slot] = &chunk{buf: rest[:0]}
		} else {
			l.mem.release(int64(cap(rest)), false)
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
