package blocks

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/s2"
	bolt "go.etcd.io/bbolt"
)

// Buckets of a partition's bbolt file.
var (
	dataBucket = []byte("data") // key → tagged value
	metaBucket = []byte("meta") // partition facts and dictionaries
)

// Keys of the meta bucket (besides the dictionaries).
const (
	metaFormat    = "format"    // partitionFormat, decimal
	metaPartition = "partition" // p, decimal
	metaRecords   = "records"   // decimal
	metaChecksum  = "checksum"  // as in PartitionInfo
	metaLayout    = "layout"    // layoutBlocks, or absent: a record per key
	metaBlockMax  = "block-max" // layoutBlocks: the largest block's uncompressed bytes, decimal
)

// partitionFormat is the layout of a partition file described in doc.go:
// a record per key. blocksFormat is that of CompressionS2Blocks, records
// in blocks keyed by their first key (metaLayout says so too), whose keys
// share their prefixes (tagPrefixRecords); readers before it refuse it
// rather than misread it. oldBlocksFormat, whose blocks store whole keys
// (tagRecords), is still read.
const (
	partitionFormat = 1
	oldBlocksFormat = 2
	blocksFormat    = 3
	layoutBlocks    = "blocks"
)

// Version is a complete version opened for reading. It is safe for
// concurrent use. Store.AddPartitions may add partitions to it while it
// serves (see "Adding partitions" in the package documentation).
type Version struct {
	dir string

	deltaKeys *deltaKeys // set by Build before it returns (DeltaKeys)

	// contents is what Gets read: replaced whole, never modified, by
	// AddPartitions. A Get loads it once, under mu held shared.
	contents atomic.Pointer[contents]

	// extendMu serialises AddPartitions' commit with Close, so that a
	// manifest is never written for a closed Version and Close always
	// sees the latest contents. Lock order: extendMu, then mu.
	extendMu sync.Mutex
	// oldDecs are decoders replaced by AddPartitions: a Get that loaded
	// the previous contents may still use one, so they are closed by
	// Close. Guarded by extendMu.
	oldDecs []*valueDecoder

	mu     sync.RWMutex // guards closed; Gets hold it shared while they use contents
	closed bool
}

// contents is one immutable state of a Version: its manifest, its open
// partitions and the decoder for their values.
type contents struct {
	manifest *Manifest
	parts    []*partition // by partition number; nil when not held
	dec      *valueDecoder
}

// partition is one open bbolt file.
type partition struct {
	db    *bolt.DB
	sdict *s2.Dict // S2 dictionary, nil if none
	sraw  []byte   // sdict's bytes, for a delta build to reuse
	// blocks: records are in blocks keyed by their first key
	// (CompressionS2Blocks).
	blocks   bool
	blockMax int          // blocks: the largest block's uncompressed size
	index    *blockIndex  // blocks: the blocks by first key; nil if the walk failed
	zdict    []byte       // zstd dictionary, nil if none (the version's decoder holds it)
	idle     chan *readTx // read transactions kept for reuse
}

// readTx is a read-only transaction reused across Gets: beginning one per
// Get halves throughput on two goroutines (FACTS.md). The file never
// changes, so a long-lived read transaction pins nothing.
type readTx struct {
	tx  *bolt.Tx
	cur *bolt.Cursor // on the data bucket; reused so that a Get allocates nothing
}

func openVersion(dir string, m *Manifest) (v *Version, err error) {
	c := &contents{manifest: m, parts: make([]*partition, m.NumPartitions)}
	defer func() {
		if err != nil {
			closeAll(c.parts)
		}
	}()
	for _, p := range m.Partitions {
		part, err := openPartition(filepath.Join(dir, partitionFile(p)), p)
		if err != nil {
			return nil, fmt.Errorf("blocks: open %s/%s partition %d: %w", m.DB, m.Version, p, err)
		}
		c.parts[p] = part
	}
	if c.dec, err = decoderFor(c.parts); err != nil {
		return nil, fmt.Errorf("blocks: open %s/%s: %w", m.DB, m.Version, err)
	}
	v = &Version{dir: dir}
	v.contents.Store(c)
	return v, nil
}

// decoderFor returns a decoder holding the zstd dictionaries of parts.
func decoderFor(parts []*partition) (*valueDecoder, error) {
	var zdicts [][]byte
	for _, part := range parts {
		if part != nil && part.zdict != nil {
			zdicts = append(zdicts, part.zdict)
		}
	}
	return newValueDecoder(zdicts)
}

// openPartition opens a partition file read-only and checks its meta
// bucket. A file on which bbolt panics gives an error wrapping ErrCorrupt.
func openPartition(path string, p int) (part *partition, err error) {
	var db *bolt.DB
	defer func() {
		if r := recover(); r != nil {
			if db != nil {
				_ = db.Close()
			}
			part, err = nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, r)
		}
	}()
	db, err = bolt.Open(path, 0o444, &bolt.Options{
		ReadOnly:     true,
		Timeout:      time.Second, // bbolt takes a shared flock; only a writer of this very file could block it
		NoStatistics: true,
	})
	if err != nil {
		return nil, err
	}
	part = &partition{db: db, idle: make(chan *readTx, 2*runtime.GOMAXPROCS(0))}
	err = db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(metaBucket)
		if meta == nil || tx.Bucket(dataBucket) == nil {
			return fmt.Errorf("%w: %s: missing buckets", ErrCorrupt, path)
		}
		part.blocks = string(meta.Get([]byte(metaLayout))) == layoutBlocks
		want := partitionFormat
		if part.blocks {
			want = blocksFormat
			n, err := strconv.Atoi(string(meta.Get([]byte(metaBlockMax))))
			if err != nil || n < 0 {
				return fmt.Errorf("%w: %s: block size %q", ErrCorrupt, path, meta.Get([]byte(metaBlockMax)))
			}
			part.blockMax = n
		}
		f := string(meta.Get([]byte(metaFormat)))
		if f != strconv.Itoa(want) && !(part.blocks && f == strconv.Itoa(oldBlocksFormat)) {
			return fmt.Errorf("%w: %s: partition format %q", ErrCorrupt, path, f)
		}
		if got := string(meta.Get([]byte(metaPartition))); got != strconv.Itoa(p) {
			return fmt.Errorf("%w: %s: holds partition %q", ErrCorrupt, path, got)
		}
		if d := meta.Get([]byte(metaS2Dict)); d != nil {
			part.sraw = append([]byte(nil), d...)
			if part.sdict = s2.NewDict(part.sraw); part.sdict == nil {
				return fmt.Errorf("%w: %s: bad s2 dictionary", ErrCorrupt, path)
			}
		}
		if d := meta.Get([]byte(metaZstdDict)); d != nil {
			part.zdict = append([]byte(nil), d...)
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	if part.blocks {
		part.index = buildBlockIndex(db)
	}
	return part, nil
}

// Manifest returns the version's manifest: the latest one, which lists
// the partitions AddPartitions added. The caller must not modify it.
func (v *Version) Manifest() *Manifest { return v.contents.Load().manifest }

// IndexBytes is the memory of the version's indexes of blocks by first
// key (CompressionS2Blocks): 24 bytes a block besides its first
// key, held while the version is open.
func (v *Version) IndexBytes() int64 {
	var n int64
	for _, part := range v.contents.Load().parts {
		if part != nil {
			n += part.index.size()
		}
	}
	return n
}

// Holds reports whether partition p is held here. Partitions are only ever
// added: once true, it stays true.
func (v *Version) Holds(p int) bool {
	return v.contents.Load().holds(p)
}

func (c *contents) holds(p int) bool {
	return p >= 0 && p < len(c.parts) && c.parts[p] != nil
}

// Get looks key up in partition p and returns a copy of its value, owned by
// the caller (non-nil, even when empty). ErrNotFound when the key is absent,
// ErrPartitionNotHeld when p is not held here, ErrClosed after Close. Get
// does not retain key.
func (v *Version) Get(p int, key []byte) ([]byte, error) {
	return v.GetLimit(p, key, -1)
}

// GetLimit is Get of a value of at most limit bytes: a larger one is
// ErrTooLarge, known before anything is allocated for it (for values
// stored raw, with S2 or in s2-blocks; a zstd value is decoded first). A
// negative limit is none.
func (v *Version) GetLimit(p int, key []byte, limit int) ([]byte, error) {
	b, err := v.getAppend(nil, p, key, limit)
	if err != nil {
		return nil, err
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

// GetAppend is Get appending the value to dst and returning the extended
// slice (dst itself on error). It allocates only when dst is too small.
// A damaged file, on which bbolt panics, gives an error wrapping
// ErrCorrupt; the read transaction is ended either way.
func (v *Version) GetAppend(dst []byte, p int, key []byte) ([]byte, error) {
	return v.getAppend(dst, p, key, -1)
}

// getAppend is GetAppend; a limit of 0 or more bounds the value's size
// (GetLimit), a negative one is none. A fault reading the memory map (a
// file cut short beneath it) is a panic, recovered as the others are.
func (v *Version) getAppend(dst []byte, p int, key []byte, limit int) (out []byte, err error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.closed {
		return dst, ErrClosed
	}
	c := v.contents.Load()
	if !c.holds(p) {
		return dst, ErrPartitionNotHeld
	}
	part := c.parts[p]
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	var rt *readTx
	defer func() {
		if r := recover(); r != nil {
			if rt != nil {
				rt.discard()
			}
			out, err = dst, fmt.Errorf("%w: %s/%s partition %d: %v", ErrCorrupt, c.manifest.DB, c.manifest.Version, p, r)
		} else if rt != nil {
			part.release(rt)
		}
	}()
	if part.index != nil {
		return part.index.get(dst, key, part.blockMax, limit)
	}
	if rt, err = part.acquire(); err != nil {
		return dst, fmt.Errorf("blocks: partition %d: %w", p, err)
	}
	// val points into the memory map: decode (copy) it before releasing.
	k, val := rt.cur.Seek(key)
	if part.blocks {
		// The block holding key, if any, is the last one whose first key
		// is not after it.
		switch {
		case k == nil:
			k, val = rt.cur.Last()
		case !bytes.Equal(k, key):
			k, val = rt.cur.Prev()
		}
		if k == nil {
			return dst, ErrNotFound
		}
		return findInBlock(dst, val, k, key, part.blockMax, limit)
	}
	if val == nil || !bytes.Equal(k, key) {
		return dst, ErrNotFound
	}
	return c.dec.decode(dst, val, part.sdict, limit)
}

// acquire returns an idle read transaction of the partition, or begins
// one. A damaged page on the way to the data bucket (bbolt panics on it)
// is ErrCorrupt.
func (part *partition) acquire() (_ *readTx, err error) {
	select {
	case rt := <-part.idle:
		return rt, nil
	default:
	}
	tx, err := part.db.Begin(false)
	if err != nil {
		return nil, err
	}
	defer func() {
		if r := recover(); r != nil {
			(&readTx{tx: tx}).discard()
			err = fmt.Errorf("%w: %v", ErrCorrupt, r)
		}
	}()
	data := tx.Bucket(dataBucket)
	if data == nil {
		_ = tx.Rollback()
		return nil, fmt.Errorf("%w: no data bucket", ErrCorrupt)
	}
	return &readTx{tx: tx, cur: data.Cursor()}, nil
}

// discard ends a read transaction that a panic interrupted; it is not
// reused.
func (rt *readTx) discard() {
	defer func() { _ = recover() }() // the transaction's own state may be what broke
	_ = rt.tx.Rollback()
}

func (part *partition) release(rt *readTx) {
	select {
	case part.idle <- rt:
	default:
		_ = rt.tx.Rollback()
	}
}

// Close closes the version. It is idempotent.
//
//  1. It waits for an AddPartitions commit under way to finish.
//  2. It waits for Gets under way to finish; later Gets return ErrClosed.
//  3. It ends the reused read transactions and closes the bbolt files and
//     the decoders.
func (v *Version) Close() error {
	v.extendMu.Lock()
	defer v.extendMu.Unlock()
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return nil
	}
	v.closed = true
	c := v.contents.Load()
	err := closeAll(c.parts)
	if c.dec != nil {
		c.dec.close()
	}
	for _, d := range v.oldDecs {
		d.close()
	}
	v.oldDecs = nil
	if err != nil {
		return fmt.Errorf("blocks: close %s/%s: %w", c.manifest.DB, c.manifest.Version, err)
	}
	return nil
}

// isClosed reports whether Close was called.
func (v *Version) isClosed() bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.closed
}

// closeAll closes the partitions of parts that are not nil.
func closeAll(parts []*partition) error {
	var errs []error
	for _, part := range parts {
		if part != nil {
			errs = append(errs, part.close())
		}
	}
	return errors.Join(errs...)
}

// close ends the partition's reused read transactions, frees its index
// and closes its file.
func (part *partition) close() error {
	part.index.free()
	for {
		select {
		case rt := <-part.idle:
			_ = rt.tx.Rollback()
		default:
			return part.db.Close()
		}
	}
}
