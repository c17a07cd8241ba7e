package main

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"

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
	ents []indexEntry // sorted by key hash
	// The keys, in the order read (an entry's ord), in parts: part p
	// holds len(klens[p]) keys, back to back in keys[p] (a builder's
	// each, as finishAll found them; one, read from a file).
	klens [][]uint16
	keys  [][]byte
}

// An indexEntry is a key's hash, its record's hash and its place in the
// order read.
type indexEntry struct {
	kh, rh uint64
	ord    uint32
}

// recordHashes are a record's key hash and record hash, as a builder
// keeps them (the place is the builder's order).
type recordHashes struct{ kh, rh uint64 }

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
	hashes []recordHashes
	klen   []uint16
	keys   []byte
}

// add adds key k (at most 32768 bytes, as a build takes) and its
// record's hash rh (blocks.Digester.AddHash).
func (ib *indexBuilder) add(k []byte, rh uint64) {
	ib.hashes = append(ib.hashes, recordHashes{xxhash.Sum64(k), rh})
	ib.klen = append(ib.klen, uint16(len(k)))
	ib.keys = append(ib.keys, k...)
}

// reserve makes room for about records more keys of keyBytes in all: a
// scan that knows its file's size does not grow its slices by doubling
// (each new page of memory is a page fault: they were most of the
// publisher's system CPU).
func (ib *indexBuilder) reserve(records, keyBytes int) {
	ib.hashes = slices.Grow(ib.hashes, records)
	ib.klen = slices.Grow(ib.klen, records)
	ib.keys = slices.Grow(ib.keys, keyBytes)
}

// finish sorts the entries by key hash and returns the index; ok false
// if two keys share a hash (a duplicate key, or a collision): the caller
// then takes the slow path, which builds.
func (ib *indexBuilder) finish(h deltaIndexHeader) (*deltaIndex, bool) {
	return finishAll(h, []*indexBuilder{ib})
}

// The entries are sorted by their key hash's top sortBits (a counting
// sort from the builders into the index), then each of those buckets by
// the next sortInnerBits (through a scratch buffer the size of the
// largest: one array of entries in all), then put in order where they
// share those bits (the hashes are uniform: a few at a time). Each step
// runs on scanWorkers goroutines: the builders' entries counted and
// placed a builder at a time (each builder's entries of a bucket have
// their own place in it), the buckets sorted a run of sortChunk at a
// time (none shares a key hash with another).
const (
	sortBits      = 11
	sortInnerBits = 8
	sortChunk     = 64 // buckets
)

// finishAll is finish over the entries of ibs, in that order (an
// entry's ord counts from the first builder's first entry). The index
// keeps the builders' keys as they are, each a part.
func finishAll(h deltaIndexHeader, ibs []*indexBuilder) (*deltaIndex, bool) {
	n, keyBytes := 0, 0
	first := make([]uint32, len(ibs))
	for f, ib := range ibs {
		if n+len(ib.hashes) > math.MaxUint32 {
			return nil, false
		}
		first[f] = uint32(n)
		n += len(ib.hashes)
		keyBytes += len(ib.keys)
	}
	// next[f][d]: where builder f's next entry of bucket d goes.
	next := make([][1 << sortBits]uint32, len(ibs))
	eachOf(len(ibs), func(f int) {
		for _, e := range ibs[f].hashes {
			next[f][e.kh>>(64-sortBits)]++
		}
	})
	var bounds [1<<sortBits + 1]uint32 // bucket d is ents[bounds[d]:bounds[d+1]]
	largest := uint32(0)
	for d := range 1 << sortBits {
		at := bounds[d]
		for f := range next {
			c := next[f][d]
			next[f][d] = at
			at += c
		}
		bounds[d+1] = at
		largest = max(largest, at-bounds[d])
	}
	ents := make([]indexEntry, n)
	eachOf(len(ibs), func(f int) {
		at := &next[f]
		for i, e := range ibs[f].hashes {
			d := e.kh >> (64 - sortBits)
			ents[at[d]] = indexEntry{e.kh, e.rh, first[f] + uint32(i)}
			at[d]++
		}
	})
	var shared atomic.Bool // two entries of one key hash
	scratch := make(chan []indexEntry, scanWorkers())
	for range cap(scratch) {
		scratch <- nil
	}
	eachOf((1<<sortBits)/sortChunk, func(c int) {
		buf := <-scratch
		if buf == nil {
			buf = make([]indexEntry, largest)
		}
		defer func() { scratch <- buf }()
		s := ents[bounds[c*sortChunk]:bounds[(c+1)*sortChunk]]
		for d := c * sortChunk; d < (c+1)*sortChunk; d++ {
			sortBucket(ents[bounds[d]:bounds[d+1]], buf)
		}
		for i := 1; i < len(s); i++ { // entries sharing their top bits
			for j := i; j > 0 && s[j].kh < s[j-1].kh; j-- {
				s[j], s[j-1] = s[j-1], s[j]
			}
		}
		for i := 1; i < len(s); i++ {
			if s[i-1].kh == s[i].kh {
				shared.Store(true)
				return
			}
		}
	})
	if shared.Load() {
		return nil, false
	}
	x := &deltaIndex{deltaIndexHeader: h, ents: ents}
	for _, ib := range ibs {
		x.klens = append(x.klens, ib.klen)
		x.keys = append(x.keys, ib.keys)
	}
	x.Format, x.Entries, x.KeyBytes = deltaIndexFormat, n, keyBytes
	return x, true
}

// eachOf calls fn(i) for every i below n, on scanWorkers goroutines.
func eachOf(n int, fn func(i int)) {
	var (
		wg   sync.WaitGroup
		next atomic.Int64
	)
	for range min(scanWorkers(), n) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				fn(i)
			}
		})
	}
	wg.Wait()
}

// sortBucket sorts s, entries sharing their key hash's top sortBits, by
// the next sortInnerBits, through scratch.
func sortBucket(s, scratch []indexEntry) {
	if len(s) < 2 {
		return
	}
	const shift = 64 - sortBits - sortInnerBits
	var counts [1<<sortInnerBits + 1]uint32
	for _, e := range s {
		counts[(e.kh>>shift)&(1<<sortInnerBits-1)+1]++
	}
	for d := 1; d < len(counts); d++ {
		counts[d] += counts[d-1]
	}
	for _, e := range s {
		d := (e.kh >> shift) & (1<<sortInnerBits - 1)
		scratch[counts[d]] = e
		counts[d]++
	}
	copy(s, scratch[:len(s)])
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
	writeInts(w, x.ents, 8, func(b []byte, e indexEntry) []byte { return binary.LittleEndian.AppendUint64(b, e.kh) })
	writeInts(w, x.ents, 8, func(b []byte, e indexEntry) []byte { return binary.LittleEndian.AppendUint64(b, e.rh) })
	writeInts(w, x.ents, 4, func(b []byte, e indexEntry) []byte { return binary.LittleEndian.AppendUint32(b, e.ord) })
	for _, kl := range x.klens {
		writeInts(w, kl, 2, binary.LittleEndian.AppendUint16)
	}
	for _, k := range x.keys {
		w.Write(k) //nolint:errcheck // Flush says
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// writeInts writes s, size bytes a value (put appends one), encoded a
// chunk at a time.
func writeInts[T any](w *bufio.Writer, s []T, size int, put func([]byte, T) []byte) {
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

// errNoIndex: the cache holds no usable index of the base.
var errNoIndex = errors.New("no index of the base in the cache")

// A baseIndex is an index file as it lies (mapped where the system
// can, else read whole): the walk reads the base's entries in place,
// and the few keys it deletes, instead of decoding every entry into new
// memory (each new page of it a page fault).
type baseIndex struct {
	deltaIndexHeader
	b                       []byte // the file, from its header line
	kh, rh, ord, klen, keys int    // where each part starts in b
	release                 func()
}

func (x *baseIndex) khAt(j int) uint64  { return binary.LittleEndian.Uint64(x.b[x.kh+8*j:]) }
func (x *baseIndex) rhAt(j int) uint64  { return binary.LittleEndian.Uint64(x.b[x.rh+8*j:]) }
func (x *baseIndex) ordAt(j int) uint32 { return binary.LittleEndian.Uint32(x.b[x.ord+4*j:]) }

// close releases the file's bytes: the keys keysOf returned with them.
func (x *baseIndex) close() { x.release() }

// keysOf returns the keys of the records ords (places in the order
// read, each less than the entries), in that order: one pass over the
// key lengths.
func (x *baseIndex) keysOf(ords []uint32) [][]byte {
	order := make([]int, len(ords))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(ords[a], ords[b]) })
	out := make([][]byte, len(ords))
	r, off := 0, x.keys // record r's key is at b[off:]
	for _, o := range order {
		for ; r < int(ords[o]); r++ {
			off += int(binary.LittleEndian.Uint16(x.b[x.klen+2*r:]))
		}
		out[o] = x.b[off : off+int(binary.LittleEndian.Uint16(x.b[x.klen+2*r:]))]
	}
	return out
}

// readMapped runs fn, which reads a baseIndex's bytes: a fault reading
// a mapped file cut short beneath it (SIGBUS) is errNoIndex, not the
// end of the process.
func readMapped(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if _, fault := r.(interface{ Addr() uintptr }); !fault {
				panic(r)
			}
			err = errNoIndex
		}
	}()
	return fn()
}

// openDeltaIndex opens the index at path and checks its header: it must
// be of version of db, under partitioner, else errNoIndex. load maps or
// reads the rest and checks it, and must be called: it closes the file.
func openDeltaIndex(path, db, version, partitioner string) (load func() (*baseIndex, error), _ error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, errNoIndex
	}
	x, size, err := readIndexHeader(f, path, db, version, partitioner)
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() (*baseIndex, error) {
		defer f.Close()
		b, release, err := mapFile(f, size)
		if err != nil {
			return nil, errNoIndex
		}
		x.release = release
		if err := readMapped(func() error { return x.check(b) }); err != nil {
			release()
			return nil, err
		}
		return x, nil
	}, nil
}

// readIndexHeader reads the header line of the index f and checks it,
// and the file's size, against what is wanted.
func readIndexHeader(f *os.File, path, db, version, partitioner string) (*baseIndex, int64, error) {
	line, err := bufio.NewReaderSize(f, 64<<10).ReadSlice('\n')
	if err != nil {
		return nil, 0, errNoIndex
	}
	x := &baseIndex{}
	if json.Unmarshal(line, &x.deltaIndexHeader) != nil || x.Format != deltaIndexFormat || x.DB != db ||
		x.Version != version || x.Partitioner != partitioner || x.Presharded || x.Entries < 0 || x.KeyBytes < 0 {
		return nil, 0, errNoIndex
	}
	fi, err := f.Stat()
	if err != nil || fi.Size() != int64(len(line))+int64(x.Entries)*entryBytes+int64(x.KeyBytes) {
		return nil, 0, fmt.Errorf("delta index %s: %w", path, errNoIndex)
	}
	n := x.Entries
	x.kh = len(line)
	x.rh = x.kh + 8*n
	x.ord = x.rh + 8*n
	x.klen = x.ord + 4*n
	x.keys = x.klen + 2*n
	return x, fi.Size(), nil
}

// check checks the index's entries in b (the whole file): key hashes
// strictly increasing, places within the entries, key lengths summing
// to the keys' bytes.
func (x *baseIndex) check(b []byte) error {
	x.b = b
	n := x.Entries
	for j := range n {
		if (j > 0 && x.khAt(j-1) >= x.khAt(j)) || x.ordAt(j) >= uint32(n) {
			return errNoIndex
		}
	}
	total := 0
	for r := range n {
		total += int(binary.LittleEndian.Uint16(x.b[x.klen+2*r:]))
	}
	if total != x.KeyBytes {
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
			return r.Each(p, blocks.Range{}, func(k, val []byte) error {
				ib.add(k, dg.AddHash(k, val))
				return nil
			})
		})
		if err != nil {
			return nil, false, err
		}
	}
	x, ok := ib.finish(deltaIndexHeader{DB: m.DB, Version: m.Version, Partitioner: m.Partitioner, NumPartitions: m.NumPartitions, Presharded: m.Presharded})
	return x, ok, nil
}
