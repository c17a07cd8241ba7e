package blocks

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
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
)

// partitionFormat is the layout of a partition file described in doc.go.
const partitionFormat = 1

// Version is a complete version opened for reading. It is safe for
// concurrent use.
type Version struct {
	manifest *Manifest
	parts    []*partition // by partition number; nil when not held
	dec      *valueDecoder

	mu     sync.RWMutex // guards closed; Gets hold it shared while they use parts
	closed bool
}

// partition is one open bbolt file.
type partition struct {
	db    *bolt.DB
	sdict *s2.Dict     // S2 dictionary, nil if none
	idle  chan *readTx // read transactions kept for reuse
}

// readTx is a read-only transaction reused across Gets: beginning one per
// Get halves throughput on two goroutines (FACTS.md). The file never
// changes, so a long-lived read transaction pins nothing.
type readTx struct {
	tx  *bolt.Tx
	cur *bolt.Cursor // on the data bucket; reused so that a Get allocates nothing
}

func openVersion(dir string, m *Manifest) (v *Version, err error) {
	v = &Version{manifest: m, parts: make([]*partition, m.NumPartitions)}
	defer func() {
		if err != nil {
			v.closeParts()
		}
	}()
	var zdicts [][]byte
	for _, p := range m.Partitions {
		part, zdict, err := openPartition(filepath.Join(dir, partitionFile(p)), p)
		if err != nil {
			return nil, fmt.Errorf("blocks: open %s/%s partition %d: %w", m.DB, m.Version, p, err)
		}
		v.parts[p] = part
		if zdict != nil {
			zdicts = append(zdicts, zdict)
		}
	}
	if v.dec, err = newValueDecoder(zdicts); err != nil {
		return nil, fmt.Errorf("blocks: open %s/%s: %w", m.DB, m.Version, err)
	}
	return v, nil
}

// openPartition opens a partition file read-only and checks its meta
// bucket. It returns the zstd dictionary, if any.
func openPartition(path string, p int) (*partition, []byte, error) {
	db, err := bolt.Open(path, 0o444, &bolt.Options{
		ReadOnly:     true,
		Timeout:      time.Second, // bbolt takes a shared flock; only a writer of this very file could block it
		NoStatistics: true,
	})
	if err != nil {
		return nil, nil, err
	}
	part := &partition{db: db, idle: make(chan *readTx, 2*runtime.GOMAXPROCS(0))}
	var zdict []byte
	err = db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(metaBucket)
		if meta == nil || tx.Bucket(dataBucket) == nil {
			return fmt.Errorf("%w: %s: missing buckets", ErrCorrupt, path)
		}
		if f := string(meta.Get([]byte(metaFormat))); f != strconv.Itoa(partitionFormat) {
			return fmt.Errorf("%w: %s: partition format %q", ErrCorrupt, path, f)
		}
		if got := string(meta.Get([]byte(metaPartition))); got != strconv.Itoa(p) {
			return fmt.Errorf("%w: %s: holds partition %q", ErrCorrupt, path, got)
		}
		if d := meta.Get([]byte(metaS2Dict)); d != nil {
			if part.sdict = s2.NewDict(append([]byte(nil), d...)); part.sdict == nil {
				return fmt.Errorf("%w: %s: bad s2 dictionary", ErrCorrupt, path)
			}
		}
		if d := meta.Get([]byte(metaZstdDict)); d != nil {
			zdict = append([]byte(nil), d...)
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, nil, err
	}
	return part, zdict, nil
}

// Manifest returns the version's manifest. The caller must not modify it.
func (v *Version) Manifest() *Manifest { return v.manifest }

// Holds reports whether partition p is held here.
func (v *Version) Holds(p int) bool {
	return p >= 0 && p < len(v.parts) && v.parts[p] != nil
}

// Get looks key up in partition p and returns a copy of its value, owned by
// the caller (non-nil, even when empty). ErrNotFound when the key is absent,
// ErrPartitionNotHeld when p is not held here, ErrClosed after Close. Get
// does not retain key.
func (v *Version) Get(p int, key []byte) ([]byte, error) {
	b, err := v.GetAppend(nil, p, key)
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
func (v *Version) GetAppend(dst []byte, p int, key []byte) ([]byte, error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.closed {
		return dst, ErrClosed
	}
	if !v.Holds(p) {
		return dst, ErrPartitionNotHeld
	}
	part := v.parts[p]
	rt, err := part.acquire()
	if err != nil {
		return dst, fmt.Errorf("blocks: partition %d: %w", p, err)
	}
	// val points into the memory map: decode (copy) it before releasing.
	k, val := rt.cur.Seek(key)
	if val == nil || !bytes.Equal(k, key) {
		err = ErrNotFound
	} else {
		dst, err = v.dec.decode(dst, val, part.sdict)
	}
	part.release(rt)
	return dst, err
}

func (part *partition) acquire() (*readTx, error) {
	select {
	case rt := <-part.idle:
		return rt, nil
	default:
	}
	tx, err := part.db.Begin(false)
	if err != nil {
		return nil, err
	}
	data := tx.Bucket(dataBucket)
	if data == nil {
		_ = tx.Rollback()
		return nil, fmt.Errorf("%w: no data bucket", ErrCorrupt)
	}
	return &readTx{tx: tx, cur: data.Cursor()}, nil
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
//  1. It waits for Gets under way to finish; later Gets return ErrClosed.
//  2. It ends the reused read transactions and closes the bbolt files.
func (v *Version) Close() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return nil
	}
	v.closed = true
	return v.closeParts()
}

func (v *Version) closeParts() error {
	var errs []error
	for _, part := range v.parts {
		if part == nil {
			continue
		}
	drain:
		for {
			select {
			case rt := <-part.idle:
				_ = rt.tx.Rollback()
			default:
				break drain
			}
		}
		errs = append(errs, part.db.Close())
	}
	if v.dec != nil {
		v.dec.close()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("blocks: close %s/%s: %w", v.manifest.DB, v.manifest.Version, err)
	}
	return nil
}
