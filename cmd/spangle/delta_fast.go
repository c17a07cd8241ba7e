package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/spangledb/spangle/blocks"
	"github.com/spangledb/spangle/blocks/seqfile"
)

// errSlowPath: the fast path cannot compute this delta or digest (input
// it does not read, a duplicate key, a key hash shared by two keys, no
// index of the base); the caller builds instead.
var errSlowPath = errors.New("fast path not taken")

// scanDir reads DIR's records without building them: their digest per
// partition and the index of the new version (deltaIndex), and, per
// file, how many records it holds. It reads only SequenceFiles, not
// presharded, under a built-in partitioner: anything else is
// errSlowPath, as is a duplicate key (the build decides which wins) or a
// record the build would refuse (it says why). Files are read by
// scanWorkers at once.
func (ls *localStore) scanDir(ctx context.Context, db, version, dir string) (*blocks.VersionDigest, *deltaIndex, []int, int64, error) {
	if *ls.df.presharded || strings.HasPrefix(ls.part.Identity(), "wasm:") ||
		(*ls.df.format != "auto" && *ls.df.format != string(blocks.FormatSequenceFile)) {
		return nil, nil, nil, 0, errSlowPath
	}
	files, total, err := dirFiles(dir)
	if err != nil {
		return nil, nil, nil, 0, err
	}
	n := len(files)
	type fileScan struct {
		digests []blocks.Digester
		ib      indexBuilder
	}
	scans := make([]fileScan, n)
	err = eachFileRecord(ctx, files, func(fi int) func(k, v []byte) error {
		fs := &scans[fi]
		fs.digests = make([]blocks.Digester, n)
		var read, keyBytes int64 // of the first records, to reserve the rest
		return func(k, v []byte) error {
			if len(k) == 0 || len(k) > 32768 {
				return errSlowPath // the build says why
			}
			p, _, err := ls.part.Partition(k, n)
			if err != nil || p < 0 || p >= n {
				return errSlowPath
			}
			fs.ib.add(k, fs.digests[p].AddHash(k, v))
			if r := len(fs.ib.hashes); r <= reserveAfter {
				read += int64(len(k)+len(v)) + recordFraming
				keyBytes += int64(len(k))
				if r == reserveAfter && files[fi].Size > read {
					more := (files[fi].Size - read) * reserveAfter / read
					fs.ib.reserve(int(more*9/8), int(more*9/8*keyBytes/reserveAfter))
				}
			}
			return nil
		}
	})
	if err != nil {
		return nil, nil, nil, 0, err
	}
	ibs := make([]*indexBuilder, n)
	parts := make([]blocks.Digest, n)
	counts := make([]int, n)
	for i := range scans {
		counts[i] = len(scans[i].ib.hashes)
		ibs[i] = &scans[i].ib
		for p := range parts {
			parts[p] = parts[p].Add(scans[i].digests[p].Digest)
		}
	}
	x, ok := finishAll(deltaIndexHeader{DB: db, Version: version, Partitioner: ls.part.Identity(), NumPartitions: n}, ibs)
	if !ok {
		return nil, nil, nil, 0, errSlowPath // a duplicate key, or a shared hash
	}
	return blocks.NewVersionDigest(ls.part.Identity(), parts), x, counts, total, nil
}

// A scan reserves room for a file's records once it has read
// reserveAfter of them, from their size (with recordFraming bytes each
// for a SequenceFile's lengths) and the file's.
const (
	reserveAfter  = 1024
	recordFraming = 16
)

// scanWorkers is how many goroutines read a dataset's files at once,
// and sort its index: one per core the process may use (GOMAXPROCS).
// Each holds a read buffer of 256 KiB; the records are not kept.
func scanWorkers() int { return runtime.GOMAXPROCS(0) }

// eachFileRecord reads every SequenceFile of files, scanWorkers at once:
// open(i) returns the function given file i's records in order.
// A file of another format is errSlowPath. The workers' read buffers
// are used again from file to file (new memory is page faults).
func eachFileRecord(ctx context.Context, files []blocks.SourceFile, open func(i int) func(k, v []byte) error) error {
	g, gctx := errgroup.WithContext(ctx)
	workers := scanWorkers()
	g.SetLimit(workers)
	readers := make(chan *bufio.Reader, workers) // a worker takes one, or nil: none made yet
	for range workers {
		readers <- nil
	}
	for fi, f := range files {
		g.Go(func() error {
			fn := open(fi)
			rc, err := f.Open(gctx)
			if err != nil {
				return err
			}
			defer rc.Close()
			br := <-readers
			if br == nil {
				br = bufio.NewReaderSize(rc, 256<<10)
			} else {
				br.Reset(rc)
			}
			defer func() { readers <- br }()
			head, _ := br.Peek(4)
			if blocks.DetectFormat(head) != blocks.FormatSequenceFile {
				return errSlowPath
			}
			sr, err := seqfile.NewReader(br, f.Name)
			if err != nil {
				return err
			}
			for rec := 0; sr.Next(); rec++ {
				if rec%4096 == 0 {
					if err := gctx.Err(); err != nil {
						return err
					}
				}
				if err := fn(sr.Key(), sr.Value()); err != nil {
					return err
				}
			}
			if err := sr.Err(); errors.Is(err, seqfile.ErrTooLarge) {
				return errSlowPath // the build's memory budget decides
			} else if err != nil {
				return err
			}
			return nil
		})
	}
	return g.Wait()
}

// fastDelta writes into out the delta of DIR over the base whose index
// the cache holds (see deltaIndex), and DIR's index beside the base's;
// keep, called once the delta is published, makes it the next base's
// (until then the base's serves a publish tried again). It reads DIR
// once for its digest and index, walks the two indexes in key hash order
// (a key in both changed if its record's hash did) and reads DIR again
// for the records added or changed only. errSlowPath if it cannot.
func (ls *localStore) fastDelta(ctx context.Context, out, db, version, baseName, dir string) (_ deltaReport, full int64, keep func() error, _ error) {
	rep, full, err := ls.writeFastDelta(ctx, out, db, version, baseName, dir)
	if err != nil {
		return rep, 0, nil, err
	}
	ls.dropBuilt(db)
	return rep, full, func() error { return keepTemp(deltaIndexPath(ls.dir, db)) }, nil
}

// writeFastDelta is fastDelta but for what keep does: DIR's index is
// written to the index's path.tmp.
func (ls *localStore) writeFastDelta(ctx context.Context, out, db, version, baseName, dir string) (deltaReport, int64, error) {
	var rep deltaReport
	if !ls.keep {
		return rep, 0, errSlowPath
	}
	// The base's index is read beside the scan of DIR.
	load, err := openDeltaIndex(deltaIndexPath(ls.dir, db), db, baseName, ls.part.Identity())
	if err != nil {
		return rep, 0, errSlowPath
	}
	loaded := make(chan error, 1)
	var base *baseIndex
	go func() {
		var err error
		base, err = load()
		loaded <- err
	}()
	vd, x, counts, full, err := ls.scanDir(ctx, db, version, dir)
	if lerr := <-loaded; lerr == nil {
		defer func() {
			if base != nil {
				base.close()
			}
		}()
	} else if err == nil {
		err = errSlowPath
	}
	if err != nil {
		return rep, 0, err
	}
	if base.NumPartitions != len(counts) {
		return rep, 0, fmt.Errorf("the dataset has %d partitions (files), the base %s %d: a delta keeps its base's partitions", len(counts), baseName, base.NumPartitions)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return rep, 0, err
	}
	df, err := os.Create(filepath.Join(out, blocks.DeletesFileName))
	if err != nil {
		return rep, 0, err
	}
	defer df.Close()
	dw := blocks.NewDeletesWriter(df)
	// The walk: upsert marks the records to write, by their place in the
	// order read.
	upsert := make([]bool, len(x.ents))
	err = readMapped(func() error {
		var deleted []uint32 // the base's records deleted, by ord
		i, j := 0, 0
		for i < len(x.ents) || j < base.Entries {
			switch {
			case j == base.Entries || (i < len(x.ents) && x.ents[i].kh < base.khAt(j)):
				upsert[x.ents[i].ord] = true
				rep.Upserts++
				i++
			case i == len(x.ents) || base.khAt(j) < x.ents[i].kh:
				deleted = append(deleted, base.ordAt(j))
				rep.Deletes++
				j++
			default: // one key (see deltaIndex)
				if x.ents[i].rh != base.rhAt(j) {
					upsert[x.ents[i].ord] = true
					rep.Upserts++
				}
				i, j = i+1, j+1
			}
		}
		for _, k := range base.keysOf(deleted) {
			if err := dw.Add(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return rep, 0, err
	}
	if err := dw.Close(); err != nil {
		return rep, 0, err
	}
	// The base's index is released (unmapped), and the new one written,
	// beside the upserts (x is only read now).
	idx := deltaIndexPath(ls.dir, db)
	written := make(chan error, 1)
	go func(base *baseIndex) {
		base.close()
		written <- x.writeTemp(idx)
	}(base)
	base = nil
	err = ls.writeUpserts(ctx, out, dir, counts, upsert)
	if err == nil {
		err = finishDelta(out, baseName, vd, &rep)
	}
	if werr := <-written; err != nil || werr != nil {
		os.Remove(idx + ".tmp")
		return rep, 0, cmp.Or(err, werr)
	}
	return rep, full, nil
}

// writeUpserts writes out/part-00000: the records of DIR marked in
// upsert (by their place in the order read; counts are the files').
func (ls *localStore) writeUpserts(ctx context.Context, out, dir string, counts []int, upsert []bool) error {
	files, _, err := dirFiles(dir)
	if err != nil {
		return err
	}
	if len(files) != len(counts) {
		return fmt.Errorf("%s changed while read", dir)
	}
	uf, err := os.Create(filepath.Join(out, "part-00000"))
	if err != nil {
		return err
	}
	defer uf.Close()
	ubw := bufio.NewWriterSize(uf, 1<<20)
	sw, err := seqfile.NewWriter(ubw, seqfile.WriterOptions{})
	if err != nil {
		return err
	}
	first := make([]int, len(counts))
	for i := 1; i < len(counts); i++ {
		first[i] = first[i-1] + counts[i-1]
	}
	var mu sync.Mutex
	err = eachFileRecord(ctx, files, func(fi int) func(k, v []byte) error {
		r := first[fi]
		return func(k, v []byte) error {
			if r >= first[fi]+counts[fi] {
				return fmt.Errorf("%s changed while read", files[fi].Name)
			}
			up := upsert[r]
			r++
			if !up {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			return sw.Append(k, v)
		}
	})
	if err != nil {
		return err
	}
	if err := sw.Close(); err != nil {
		return err
	}
	return ubw.Flush()
}

// keepIndex keeps x as the cache's index of db, and drops the versions
// of db the cache built: the index serves the next --base.
func (ls *localStore) keepIndex(db string, x *deltaIndex) error {
	idx := deltaIndexPath(ls.dir, db)
	if err := x.writeTemp(idx); err != nil {
		return err
	}
	ls.dropBuilt(db)
	return keepTemp(idx)
}

// dropBuilt removes every version of db from the cache: its index serves
// the next --base.
func (ls *localStore) dropBuilt(db string) {
	ls.keepOnly(db, "")
}

// keepTemp makes the index written to path.tmp the one at path.
func keepTemp(path string) error { return os.Rename(path+".tmp", path) }

// finishDelta writes a delta's _DIGEST and _BASE, and adds its files'
// sizes to rep.
func finishDelta(out, base string, vd *blocks.VersionDigest, rep *deltaReport) error {
	if err := os.WriteFile(filepath.Join(out, blocks.DigestFileName), vd.Marshal(), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, blocks.BaseFileName), []byte(base+"\n"), 0o644); err != nil {
		return err
	}
	for _, f := range []string{"part-00000", blocks.DeletesFileName, blocks.DigestFileName, blocks.BaseFileName} {
		if fi, err := os.Stat(filepath.Join(out, f)); err == nil {
			rep.Bytes += fi.Size()
		}
	}
	return nil
}
