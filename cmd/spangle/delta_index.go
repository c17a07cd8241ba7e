package main

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/cespare/xxhash/v2"

	"github.com/spangledb/spangle/blocks"
)

// A deltaIndex is what publish --cache keeps of the last version it
// published of a db, to compute the next delta without building either
// version: per key, XXH64 (seed 0) of the key and of the value (as
// served), sorted by key hash, and the key itself (a deleted key is
// written by name; a key hash that matches is confirmed on the bytes).
// A value whose 64-bit hash is unchanged although its bytes changed
// would be missed (about 2^-64 per changed key); the version's digest,
// computed from every record, then refuses the delta at the nodes.
type deltaIndex struct {
	deltaIndexHeader
	kh, vh []uint64
	offs   []uint64 // key i is keys[offs[i]:offs[i+1]]
	keys   []byte
	// ord is, per entry, the record's place in the order read (from
	// finish; not written).
	ord []uint32
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

const (
	deltaIndexFormat = 1
	deltaIndexDir    = "delta-index" // under the cache directory
	prefixBits       = 20
)

func deltaIndexPath(cache, db string) string {
	return filepath.Join(cache, deltaIndexDir, db+".idx")
}

// indexBuilder collects a version's keys and value hashes.
type indexBuilder struct {
	kh, vh []uint64
	offs   []uint64
	keys   []byte
}

func (ib *indexBuilder) add(k, v []byte) {
	ib.kh = append(ib.kh, xxhash.Sum64(k))
	ib.vh = append(ib.vh, xxhash.Sum64(v))
	ib.offs = append(ib.offs, uint64(len(ib.keys)))
	ib.keys = append(ib.keys, k...)
}

// finish sorts the entries by key hash and returns the index; ok false
// if two keys share a hash (a duplicate key, or a collision): the caller
// then takes the slow path, which builds.
func (ib *indexBuilder) finish(h deltaIndexHeader) (*deltaIndex, bool) {
	return finishAll(h, []*indexBuilder{ib})
}

// finishAll is finish over the entries of ibs, in that order (an
// entry's ord counts from the first builder's first entry). The hashes
// are uniform: the entries are placed by their top bits (a counting
// sort), then each small bucket sorted.
func finishAll(h deltaIndexHeader, ibs []*indexBuilder) (*deltaIndex, bool) {
	n, keyBytes := 0, 0
	first := make([]uint32, len(ibs))
	for f, ib := range ibs {
		if n+len(ib.kh) > math.MaxUint32 {
			return nil, false
		}
		first[f] = uint32(n)
		n += len(ib.kh)
		keyBytes += len(ib.keys)
	}
	type ent struct {
		kh   uint64
		i, f uint32 // entry i of ibs[f]
	}
	counts := make([]uint32, 1<<prefixBits+1)
	for _, ib := range ibs {
		for _, kh := range ib.kh {
			counts[kh>>(64-prefixBits)+1]++
		}
	}
	for b := 1; b < len(counts); b++ {
		counts[b] += counts[b-1]
	}
	ents := make([]ent, n)
	next := slices.Clone(counts[:1<<prefixBits])
	for f, ib := range ibs {
		for i, kh := range ib.kh {
			b := kh >> (64 - prefixBits)
			ents[next[b]] = ent{kh, uint32(i), uint32(f)}
			next[b]++
		}
	}
	for b := range 1 << prefixBits {
		s := ents[counts[b]:counts[b+1]]
		if len(s) > 1 {
			slices.SortFunc(s, func(a, b ent) int { return cmp.Compare(a.kh, b.kh) })
		}
	}
	x := &deltaIndex{deltaIndexHeader: h, kh: make([]uint64, n), vh: make([]uint64, n), offs: make([]uint64, n+1), keys: make([]byte, 0, keyBytes), ord: make([]uint32, n)}
	for i, e := range ents {
		if i > 0 && e.kh == x.kh[i-1] {
			return nil, false
		}
		ib, j := ibs[e.f], int(e.i)
		end := uint64(len(ib.keys))
		if j+1 < len(ib.kh) {
			end = ib.offs[j+1]
		}
		x.ord[i] = first[e.f] + e.i
		x.kh[i], x.vh[i], x.offs[i] = e.kh, ib.vh[j], uint64(len(x.keys))
		x.keys = append(x.keys, ib.keys[ib.offs[j]:end]...)
	}
	x.offs[n] = uint64(len(x.keys))
	x.Format, x.Entries, x.KeyBytes = deltaIndexFormat, n, len(x.keys)
	return x, true
}

func (x *deltaIndex) key(i int) []byte { return x.keys[x.offs[i]:x.offs[i+1]] }

// write writes the index to path, through a temporary file renamed.
func (x *deltaIndex) write(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	hdr, err := json.Marshal(x.deltaIndexHeader)
	if err != nil {
		return err
	}
	w.Write(append(hdr, '\n')) //nolint:errcheck // Flush says
	var b [8]byte
	for _, s := range [][]uint64{x.kh, x.vh, x.offs} {
		for _, v := range s {
			binary.LittleEndian.PutUint64(b[:], v)
			w.Write(b[:]) //nolint:errcheck // Flush says
		}
	}
	w.Write(x.keys) //nolint:errcheck // Flush says
	if err := w.Flush(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// errNoIndex: the cache holds no usable index of the base.
var errNoIndex = errors.New("no index of the base in the cache")

// readDeltaIndex reads the index at path; it must be of version of db,
// under partitioner, else errNoIndex.
func readDeltaIndex(path, db, version, partitioner string) (*deltaIndex, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, errNoIndex
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	line, err := r.ReadBytes('\n')
	if err != nil || len(line) > 64<<10 {
		return nil, errNoIndex
	}
	x := &deltaIndex{}
	if json.Unmarshal(line, &x.deltaIndexHeader) != nil || x.Format != deltaIndexFormat || x.DB != db ||
		x.Version != version || x.Partitioner != partitioner || x.Presharded || x.Entries < 0 || x.KeyBytes < 0 {
		return nil, errNoIndex
	}
	fi, err := f.Stat()
	if err != nil || fi.Size() != int64(len(line))+int64(x.Entries)*24+8+int64(x.KeyBytes) {
		return nil, fmt.Errorf("delta index %s: %w", path, errNoIndex)
	}
	n := x.Entries
	x.kh, x.vh, x.offs = make([]uint64, n), make([]uint64, n), make([]uint64, n+1)
	buf := make([]byte, 8*(n+1))
	for _, s := range [][]uint64{x.kh, x.vh, x.offs} {
		b := buf[:8*len(s)]
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, errNoIndex
		}
		for i := range s {
			s[i] = binary.LittleEndian.Uint64(b[8*i:])
		}
	}
	x.keys = make([]byte, x.KeyBytes)
	if _, err := io.ReadFull(r, x.keys); err != nil {
		return nil, errNoIndex
	}
	for i := range n {
		if x.offs[i] > x.offs[i+1] || (i > 0 && x.kh[i-1] >= x.kh[i]) {
			return nil, errNoIndex
		}
	}
	if x.offs[n] != uint64(x.KeyBytes) || (n > 0 && x.offs[0] != 0) {
		return nil, errNoIndex
	}
	return x, nil
}

// indexOf returns the index of a version built (the slow path's), to be
// kept for the next publish; ok false as finish says.
func indexOf(v *blocks.Version) (*deltaIndex, bool, error) {
	m := v.Manifest()
	var ib indexBuilder
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
				ib.add(it.Key(), val)
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
