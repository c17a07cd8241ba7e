package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/cespare/xxhash/v2"

	"github.com/spangledb/spangle/blocks"
)

// A deltaIndex is what publish --cache keeps of the last version it
// published of a db, to compute the next delta without building either
// version: per key, XXH64 (seed 0) of the key and the record's hash (its
// lane 1 hash in the version's digest: of the key and the value as
// served, blocks.Digester.AddHash), sorted by key hash, and the keys (a
// deleted key is written by name). The walk of two indexes matches keys
// by their hash alone: a key of the new version whose hash is a deleted
// key's (about 2^-64 per pair of an added and a deleted key) would be
// taken for it, and a record whose hash is unchanged although its value
// changed (2^-64 per changed key) would be missed; the version's digest,
// computed from every record, then refuses the delta at the nodes. Two
// keys of one version sharing a hash (a duplicate key, or a collision)
// are seen as the index is sorted: the build decides.
type deltaIndex struct {
	deltaIndexHeader
	kh, rh []uint64 // sorted by kh
	// ord is, per entry, the record's place in the order read; the keys
	// are kept in that order: record r's is keys[offs[r]:offs[r+1]], of
	// length klen[r].
	ord  []uint32
	klen []uint16
	offs []uint64
	keys []byte
}

// deltaIndexHeader is the index file's first line (JSON).
type deltaIndexHeader struct {
	Format        int    `json:"format"`
	DB            string `json:"db"`
	Version       string `json:"version"`
	Partitioner   string `json:"partitioner"`
	NumPartitions int    `json:"num_partitions"`
	Presharded    bool   `json:"presharded,omitempty"`
	Entries       int    `json:"entries"`
	KeyBytes      int    `json:"key_bytes"`
}

// The index file: the header line, then little-endian kh and rh (8
// bytes an entry), ord (4), klen (2), then the keys. Format 1 (the keys
// in hash order, compared on their bytes) is not read: the next publish
// builds and keeps a format 2 index.
const (
	deltaIndexFormat = 2
	deltaIndexDir    = "delta-index" // under the cache directory
	entryBytes       = 8 + 8 + 4 + 2
)

func deltaIndexPath(cache, db string) string {
	return filepath.Join(cache, deltaIndexDir, db+".idx")
}

// indexBuilder collects a version's key hashes, record hashes and keys
// in the order read.
type indexBuilder struct {
	kh, rh []uint64
	klen   []uint16
	keys   []byte
}

// add adds key k (at most 32768 bytes, as a build takes) and its
// record's hash rh (blocks.Digester.AddHash).
func (ib *indexBuilder) add(k []byte, rh uint64) {
	ib.kh = append(ib.kh, xxhash.Sum64(k))
	ib.rh = append(ib.rh, rh)
	ib.klen = append(ib.klen, uint16(len(k)))
	ib.keys = append(ib.keys, k...)
}

// finish sorts the entries by key hash and returns the index; ok false
// if two keys share a hash (a duplicate key, or a collision): the caller
// then takes the slow path, which builds.
func (ib *indexBuilder) finish(h deltaIndexHeader) (*deltaIndex, bool) {
	return finishAll(h, []*indexBuilder{ib})
}

// sortBits are the top bits of the key hash the entries are sorted by,
// in two passes of a radix sort (the rest is put in order after: the
// hashes are uniform, so entries sharing those bits are few).
const (
	sortPassBits = 11
	sortBits     = 2 * sortPassBits
)

// finishAll is finish over the entries of ibs, in that order (an
// entry's ord counts from the first builder's first entry).
func finishAll(h deltaIndexHeader, ibs []*indexBuilder) (*deltaIndex, bool) {
	n, keyBytes := 0, 0
	for _, ib := range ibs {
		if n+len(ib.kh) > math.MaxUint32 {
			return nil, false
		}
		n += len(ib.kh)
		keyBytes += len(ib.keys)
	}
	type ent struct {
		kh, rh uint64
		ord    uint32
	}
	a, b := make([]ent, 0, n), make([]ent, n)
	x := &deltaIndex{deltaIndexHeader: h, klen: make([]uint16, 0, n), keys: make([]byte, 0, keyBytes)}
	for _, ib := range ibs {
		for i, kh := range ib.kh {
			a = append(a, ent{kh, ib.rh[i], uint32(len(a))})
		}
		x.klen = append(x.klen, ib.klen...)
		x.keys = append(x.keys, ib.keys...)
	}
	// Two stable counting passes, the lower bits first.
	for pass := range 2 {
		shift := 64 - sortBits + pass*sortPassBits
		var counts [1<<sortPassBits + 1]uint32
		for _, e := range a {
			counts[(e.kh>>shift)&(1<<sortPassBits-1)+1]++
		}
		for d := 1; d < len(counts); d++ {
			counts[d] += counts[d-1]
		}
		for _, e := range a {
			d := (e.kh >> shift) & (1<<sortPassBits - 1)
			b[counts[d]] = e
			counts[d]++
		}
		a, b = b, a
	}
	for i := 1; i < n; i++ { // entries sharing their top bits
		for j := i; j > 0 && a[j].kh < a[j-1].kh; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
	x.kh, x.rh, x.ord = make([]uint64, n), make([]uint64, n), make([]uint32, n)
	for i, e := range a {
		if i > 0 && e.kh == x.kh[i-1] {
			return nil, false
		}
		x.kh[i], x.rh[i], x.ord[i] = e.kh, e.rh, e.ord
	}
	x.offs = keyOffsets(x.klen)
	x.Format, x.Entries, x.KeyBytes = deltaIndexFormat, n, len(x.keys)
	return x, true
}

// keyOffsets returns where each key starts, and their total length last.
func keyOffsets(klen []uint16) []uint64 {
	offs := make([]uint64, len(klen)+1)
	for r, l := range klen {
		offs[r+1] = offs[r] + uint64(l)
	}
	return offs
}

// key returns entry i's key.
func (x *deltaIndex) key(i int) []byte {
	r := x.ord[i]
	return x.keys[x.offs[r]:x.offs[r+1]]
}

// write writes the index to path, through a temporary file renamed.
func (x *deltaIndex) write(path string) error {
	if err := x.writeTemp(path); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

// writeTemp writes the index to path.tmp, removed if it fails.
func (x *deltaIndex) writeTemp(path string) (err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	hdr, err := json.Marshal(x.deltaIndexHeader)
	if err != nil {
		return err
	}
	w.Write(append(hdr, '\n')) //nolint:errcheck // Flush says
	for _, s := range [][]uint64{x.kh, x.rh} {
		writeInts(w, s, 8, func(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) })
	}
	writeInts(w, x.ord, 4, func(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) })
	writeInts(w, x.klen, 2, func(b []byte, v uint16) []byte { return binary.LittleEndian.AppendUint16(b, v) })
	w.Write(x.keys) //nolint:errcheck // Flush says
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// writeInts writes s, size bytes a value, encoded a chunk at a time.
func writeInts[T uint16 | uint32 | uint64](w *bufio.Writer, s []T, size int, put func([]byte, T) []byte) {
	buf := make([]byte, 0, 64<<10)
	for len(s) > 0 {
		c := s[:min(len(s), cap(buf)/size)]
		s = s[len(c):]
		buf = buf[:0]
		for _, v := range c {
			buf = put(buf, v)
		}
		w.Write(buf) //nolint:errcheck // Flush says
	}
}

// readInts fills s from r, size bytes a value.
func readInts[T uint16 | uint32 | uint64](r io.Reader, s []T, size int, get func([]byte) T) error {
	buf := make([]byte, 64<<10)
	for len(s) > 0 {
		c := s[:min(len(s), len(buf)/size)]
		s = s[len(c):]
		b := buf[:len(c)*size]
		if _, err := io.ReadFull(r, b); err != nil {
			return err
		}
		for i := range c {
			c[i] = get(b[i*size:])
		}
	}
	return nil
}

// errNoIndex: the cache holds no usable index of the base.
var errNoIndex = errors.New("no index of the base in the cache")

// openDeltaIndex opens the index at path and checks its header: it must
// be of version of db, under partitioner, else errNoIndex. load reads
// the rest, and must be called: it closes the file.
func openDeltaIndex(path, db, version, partitioner string) (load func() (*deltaIndex, error), _ error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, errNoIndex
	}
	r := bufio.NewReaderSize(f, 1<<20)
	x, err := readIndexHeader(f, r, path, db, version, partitioner)
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() (*deltaIndex, error) {
		defer f.Close()
		return x, x.readBody(r)
	}, nil
}

// readIndexHeader reads the header line of the index f (read through
// r) and checks it, and the file's size, against what is wanted.
func readIndexHeader(f *os.File, r *bufio.Reader, path, db, version, partitioner string) (*deltaIndex, error) {
	line, err := r.ReadSlice('\n')
	if err != nil || len(line) > 64<<10 {
		return nil, errNoIndex
	}
	x := &deltaIndex{}
	if json.Unmarshal(line, &x.deltaIndexHeader) != nil || x.Format != deltaIndexFormat || x.DB != db ||
		x.Version != version || x.Partitioner != partitioner || x.Presharded || x.Entries < 0 || x.KeyBytes < 0 {
		return nil, errNoIndex
	}
	fi, err := f.Stat()
	if err != nil || fi.Size() != int64(len(line))+int64(x.Entries)*entryBytes+int64(x.KeyBytes) {
		return nil, fmt.Errorf("delta index %s: %w", path, errNoIndex)
	}
	return x, nil
}

// readBody reads the index's entries and keys (the header read).
func (x *deltaIndex) readBody(r io.Reader) error {
	n := x.Entries
	x.kh, x.rh, x.ord, x.klen = make([]uint64, n), make([]uint64, n), make([]uint32, n), make([]uint16, n)
	for _, s := range [][]uint64{x.kh, x.rh} {
		if readInts(r, s, 8, binary.LittleEndian.Uint64) != nil {
			return errNoIndex
		}
	}
	if readInts(r, x.ord, 4, binary.LittleEndian.Uint32) != nil || readInts(r, x.klen, 2, binary.LittleEndian.Uint16) != nil {
		return errNoIndex
	}
	x.keys = make([]byte, x.KeyBytes)
	if _, err := io.ReadFull(r, x.keys); err != nil {
		return errNoIndex
	}
	for i := range n {
		if (i > 0 && x.kh[i-1] >= x.kh[i]) || x.ord[i] >= uint32(n) {
			return errNoIndex
		}
	}
	if x.offs = keyOffsets(x.klen); x.offs[n] != uint64(x.KeyBytes) {
		return errNoIndex
	}
	return nil
}

// indexOf returns the index of a version built (the slow path's), to be
// kept for the next publish; ok false as finish says.
func indexOf(v *blocks.Version) (*deltaIndex, bool, error) {
	m := v.Manifest()
	var (
		ib indexBuilder
		dg blocks.Digester
	)
	for p := range m.NumPartitions {
		err := v.View(func(r *blocks.Reader) error {
			it, err := r.Iter(p, blocks.Range{})
			if err != nil {
				return err
			}
			for it.Next() {
				val, err := it.Value()
				if err != nil {
					return err
				}
				ib.add(it.Key(), dg.AddHash(it.Key(), val))
			}
			return it.Err()
		})
		if err != nil {
			return nil, false, err
		}
	}
	x, ok := ib.finish(deltaIndexHeader{DB: m.DB, Version: m.Version, Partitioner: m.Partitioner, NumPartitions: m.NumPartitions, Presharded: m.Presharded})
	return x, ok, nil
}
