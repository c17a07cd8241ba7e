package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/spangledb/spangle/blocks"
	"github.com/spangledb/spangle/blocks/seqfile"
	"github.com/spangledb/spangle/node/nodetest"
)

func testDatasetFlags() datasetFlags {
	return addDatasetFlags(flag.NewFlagSet("t", flag.ContinueOnError))
}

// readUpserts returns a delta's part-00000 as key → value.
func readUpserts(t *testing.T, dir string) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "part-00000"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := seqfile.NewReader(f, "part-00000")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for r.Next() {
		if _, dup := m[string(r.Key())]; dup {
			t.Fatalf("%s: %q upserted twice", dir, r.Key())
		}
		m[string(r.Key())] = string(r.Value())
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

// dump returns every record of v, by partition in key order.
func dump(t *testing.T, v *blocks.Version) []string {
	t.Helper()
	var out []string
	err := v.View(func(r *blocks.Reader) error {
		for p := range v.Manifest().NumPartitions {
			if err := r.Each(p, blocks.Range{}, func(k, val []byte) error {
				out = append(out, fmt.Sprintf("%d %s=%s", p, k, val))
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFastDeltaLikeSlow: the delta publish --base --cache computes from
// the cache's index of the base, reading DIR once without building it,
// is the slow path's (the two versions built and merged): the same
// records upserted, the same number deleted, the same _DIGEST byte for
// byte; the version a node builds from it over the base is the full
// build of DIR record by record, and its digest is the _DIGEST. A
// chain of two deltas goes through the index the first one kept (once
// published: until then the base's serves a publish tried again). A
// value rewritten unchanged is not upserted.
func TestFastDeltaLikeSlow(t *testing.T) {
	ctx := context.Background()
	work, cache := t.TempDir(), t.TempDir()
	df := testDatasetFlags()
	recs := nodetest.Numbered("v1", 2000)
	nodetest.WriteVersion(t, work, "d", "v1", 4, recs)
	fast, err := openLocalStore(ctx, df, cache)
	if err != nil {
		t.Fatal(err)
	}
	defer fast.close()
	slow, err := openLocalStore(ctx, df, "")
	if err != nil {
		t.Fatal(err)
	}
	defer slow.close()
	// v1 as publish --digest --cache keeps it: the index alone.
	vd1, x, _, _, err := fast.scanDir(ctx, "d", "v1", filepath.Join(work, "d", "v1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := fast.keepIndex("d", x); err != nil {
		t.Fatal(err)
	}
	prev, _, err := slow.buildDir(ctx, "d", "v1", filepath.Join(work, "d", "v1"))
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := blocks.DigestOf(prev.Manifest()); !bytes.Equal(vd1.Marshal(), want.Marshal()) {
		t.Fatalf("scanned digest %s, built %s", vd1.Total, want.Total)
	}
	for step, change := range []func([]nodetest.Record) []nodetest.Record{
		func(rs []nodetest.Record) []nodetest.Record {
			for i := 0; i < 100; i++ {
				rs[i*7].Value = fmt.Appendf(nil, "v2:%d", i*7) // changed
			}
			rs[1].Value = []byte("v1:1") // rewritten, unchanged
			for i := 0; i < 50; i++ {
				rs = append(rs, nodetest.Record{Key: fmt.Appendf(nil, "new-%d", i), Value: []byte("new")})
			}
			return append(rs[:500], rs[520:]...) // 20 deleted
		},
		func(rs []nodetest.Record) []nodetest.Record {
			rs[3].Value = []byte("v3")
			return rs[10:]
		},
	} {
		base, version := fmt.Sprintf("v%d", step+1), fmt.Sprintf("v%d", step+2)
		recs = change(recs)
		dir := filepath.Join(work, "d", version)
		nodetest.WriteVersion(t, work, "d", version, 4, recs)
		outFast, outSlow := filepath.Join(work, "fast-"+version), filepath.Join(work, "slow-"+version)
		frep, _, keep, err := fast.fastDelta(ctx, outFast, "d", version, base, dir)
		if err != nil {
			t.Fatalf("%s: fast path: %v", version, err)
		}
		// Not kept yet (not published): a publish tried again finds the
		// base's index.
		if _, _, _, err := fast.fastDelta(ctx, outFast+"-again", "d", version, base, dir); err != nil {
			t.Fatalf("%s: the fast path tried again before keep: %v", version, err)
		}
		if err := keep(); err != nil {
			t.Fatal(err)
		}
		next, _, err := slow.buildDir(ctx, "d", version, dir)
		if err != nil {
			t.Fatal(err)
		}
		srep, err := writeDelta(ctx, outSlow, next, prev)
		if err != nil {
			t.Fatal(err)
		}
		if frep.Upserts != srep.Upserts || frep.Deletes != srep.Deletes {
			t.Errorf("%s: fast %+v, slow %+v", version, frep, srep)
		}
		fu, su := readUpserts(t, outFast), readUpserts(t, outSlow)
		if len(fu) != len(su) {
			t.Errorf("%s: fast upserts %d, slow %d", version, len(fu), len(su))
		}
		for k, v := range su {
			if fu[k] != v {
				t.Errorf("%s: upsert %s: fast %q, slow %q", version, k, fu[k], v)
			}
		}
		if _, ok := fu["key-1"]; ok && step == 0 {
			t.Errorf("key-1, rewritten with its value, upserted")
		}
		for _, f := range []string{blocks.DigestFileName, blocks.BaseFileName} {
			a, _ := os.ReadFile(filepath.Join(outFast, f))
			b, _ := os.ReadFile(filepath.Join(outSlow, f))
			if !bytes.Equal(a, b) || len(a) == 0 {
				t.Errorf("%s: %s: fast %q, slow %q", version, f, a, b)
			}
		}
		// A node's build of the fast delta over the base is the full build.
		files, _, err := dirFiles(outFast)
		if err != nil {
			t.Fatal(err)
		}
		spec := slow.spec("n", version, files)
		var nb *blocks.Version
		if base == "v1" {
			nb, _, err = slow.buildDir(ctx, "n", base, filepath.Join(work, "d", base))
		} else {
			nb, err = slow.Open("n", base) // the delta-built one
		}
		if err != nil {
			t.Fatal(err)
		}
		spec.Base = nb
		dp := filepath.Join(outFast, blocks.DeletesFileName)
		spec.Deletes = []blocks.SourceFile{{Name: blocks.DeletesFileName, Size: -1,
			Open: func(context.Context) (io.ReadCloser, error) { return os.Open(dp) }}}
		built, err := slow.Build(ctx, spec)
		nb.Close()
		if err != nil {
			t.Fatalf("%s: build the fast delta: %v", version, err)
		}
		got, want := dump(t, built), dump(t, next)
		if len(got) != len(want) {
			t.Fatalf("%s: delta-built %d records, full %d", version, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: record %d: delta-built %s, full %s", version, i, got[i], want[i])
			}
		}
		fd, _ := os.ReadFile(filepath.Join(outFast, blocks.DigestFileName))
		if bd, _ := blocks.DigestOf(built.Manifest()); !bytes.Equal(bd.Marshal(), fd) {
			t.Errorf("%s: the delta-built version's digest %s, _DIGEST %s", version, bd.Total, fd)
		}
		built.Close()
		prev.Close()
		prev = next
	}
	prev.Close()
}

// TestFastDeltaFallsBack: the fast path refuses what it cannot decide
// (a duplicate key: the build's last one wins; no index of the base;
// presharded input) with errSlowPath, and publish then builds.
func TestFastDeltaFallsBack(t *testing.T) {
	ctx := context.Background()
	work, cache := t.TempDir(), t.TempDir()
	df := testDatasetFlags()
	recs := nodetest.Numbered("v1", 100)
	nodetest.WriteVersion(t, work, "d", "v1", 2, recs)
	ls, err := openLocalStore(ctx, df, cache)
	if err != nil {
		t.Fatal(err)
	}
	defer ls.close()
	out := filepath.Join(work, "out")
	if _, _, _, err := ls.fastDelta(ctx, out, "d", "v2", "v1", filepath.Join(work, "d", "v1")); !errors.Is(err, errSlowPath) {
		t.Fatalf("no index: %v", err)
	}
	_, x, _, _, err := ls.scanDir(ctx, "d", "v1", filepath.Join(work, "d", "v1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.keepIndex("d", x); err != nil {
		t.Fatal(err)
	}
	// A damaged index, or one of format 1 (keys in hash order), is none.
	idx := deltaIndexPath(cache, "d")
	good, err := os.ReadFile(idx)
	if err != nil {
		t.Fatal(err)
	}
	hdr := bytes.IndexByte(good, '\n') + 1
	for name, damage := range map[string]func([]byte) []byte{
		"format 1":        func(b []byte) []byte { return bytes.Replace(b, []byte(`"format":2`), []byte(`"format":1`), 1) },
		"truncated":       func(b []byte) []byte { return b[:len(b)-1] },
		"an ord too high": func(b []byte) []byte { b[hdr+16*100+3] = 0xff; return b },
		"keys too long":   func(b []byte) []byte { b[hdr+20*100+1] = 0xff; return b },
	} {
		if err := os.WriteFile(idx, damage(bytes.Clone(good)), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := ls.fastDelta(ctx, out, "d", "v2", "v1", filepath.Join(work, "d", "v1")); !errors.Is(err, errSlowPath) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := os.WriteFile(idx, good, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, rs := range map[string][]nodetest.Record{
		"a duplicate key in the base":  append(recs[:len(recs):len(recs)], nodetest.Record{Key: []byte("key-3"), Value: []byte("x")}),
		"a duplicate key, new":         append(recs[:len(recs):len(recs)], nodetest.Record{Key: []byte("k"), Value: []byte("x")}, nodetest.Record{Key: []byte("k"), Value: []byte("y")}),
		"a duplicate key, same values": append(recs[:len(recs):len(recs)], recs[7]),
	} {
		root := t.TempDir()
		nodetest.WriteVersion(t, root, "d", "v2", 2, rs)
		dir := filepath.Join(root, "d", "v2")
		if _, _, _, err := ls.fastDelta(ctx, out, "d", "v2", "v1", dir); !errors.Is(err, errSlowPath) {
			t.Errorf("%s: %v", name, err)
		}
	}
	*df.presharded = true
	if _, _, _, err := ls.fastDelta(ctx, out, "d", "v2", "v1", filepath.Join(work, "d", "v1")); !errors.Is(err, errSlowPath) {
		t.Errorf("presharded: %v", err)
	}
}

// TestIndexKeysOf: an index written from builders' parts (an empty one
// among them) and read again has its entries, and finds its records'
// keys by their place in the order read.
func TestIndexKeysOf(t *testing.T) {
	var ibs [3]indexBuilder
	for _, k := range []string{"a", "bb"} {
		ibs[0].add([]byte(k), 1)
	}
	ibs[2].add([]byte("ccc"), 2)
	x, ok := finishAll(deltaIndexHeader{DB: "d", Version: "v", Partitioner: "p"}, []*indexBuilder{&ibs[0], &ibs[1], &ibs[2]})
	if !ok {
		t.Fatal("finishAll")
	}
	y, _ := writeAndLoad(t, x)
	got := y.keysOf([]uint32{2, 0, 1, 2})
	if want := []string{"ccc", "a", "bb", "ccc"}; fmt.Sprintf("%s", got) != fmt.Sprintf("%s", want) {
		t.Errorf("keysOf: %s, want %s", got, want)
	}
	for j, e := range x.ents {
		if y.khAt(j) != e.kh || y.rhAt(j) != e.rh || y.ordAt(j) != e.ord {
			t.Errorf("entry %d: read %x %x %d, written %+v", j, y.khAt(j), y.rhAt(j), y.ordAt(j), e)
		}
	}
}

// writeAndLoad writes x (of db "d", version "v", partitioner "p") to a
// file of the test's and loads it back, closed at cleanup; it returns
// the loaded index and the file's path.
func writeAndLoad(t *testing.T, x *deltaIndex) (*baseIndex, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "d.idx")
	if err := x.write(path); err != nil {
		t.Fatal(err)
	}
	load, err := openDeltaIndex(path, "d", "v", "p")
	if err != nil {
		t.Fatal(err)
	}
	y, err := load()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { y.close() })
	return y, path
}

// TestIndexDuplicateHash: two entries of one key hash are found
// whatever their order and whatever sorts between them, within a
// builder and across two (the fast path then leaves the version to the
// build).
func TestIndexDuplicateHash(t *testing.T) {
	const base = uint64(0x1234) << 48 // the same top bits
	for _, khs := range [][]uint64{{5, 6, 5}, {6, 5, 5}, {5, 5, 6}, {5, 9, 7, 6, 5}, {9, 5, 8, 6, 7, 5, 4}} {
		for split := 0; split <= len(khs); split++ {
			var ibs [2]indexBuilder
			for i, kh := range khs {
				ib := &ibs[0]
				if i >= split {
					ib = &ibs[1]
				}
				ib.hashes = append(ib.hashes, recordHashes{kh: base + kh})
				ib.klen = append(ib.klen, 1)
				ib.keys = append(ib.keys, 'k')
			}
			if _, ok := finishAll(deltaIndexHeader{}, []*indexBuilder{&ibs[0], &ibs[1]}); ok {
				t.Errorf("%v split at %d: a shared hash not found", khs, split)
			}
		}
	}
}

// TestIndexSorted: the entries of builders of unequal sizes (one
// empty), their hashes spread over every bucket or crowded into a few
// top bits, come out sorted by key hash, each with its record hash and
// its place in the order read, as a plain sort puts them.
func TestIndexSorted(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct {
		mask uint64 // bits kept at 0
		div  int    // of the builders' sizes
	}{{0, 1}, {0xffe0_0000_0000_0000, 1}, {0xffff_e000_0000_0000, 100}} { // every bucket; one; one of its inner ones
		mask := c.mask
		var ibs [5]indexBuilder
		var want []indexEntry
		for f, size := range []int{30_000, 0, 100, 70_000, 5_000} {
			for range size / c.div {
				e := indexEntry{kh: r.Uint64() &^ mask, rh: r.Uint64(), ord: uint32(len(want))}
				ibs[f].hashes = append(ibs[f].hashes, recordHashes{e.kh, e.rh})
				ibs[f].klen = append(ibs[f].klen, 0)
				want = append(want, e)
			}
		}
		slices.SortFunc(want, func(a, b indexEntry) int { return cmp.Compare(a.kh, b.kh) })
		x, ok := finishAll(deltaIndexHeader{}, []*indexBuilder{&ibs[0], &ibs[1], &ibs[2], &ibs[3], &ibs[4]})
		if !ok {
			t.Fatalf("mask %x: a shared hash found", mask)
		}
		if !slices.Equal(x.ents, want) {
			t.Fatalf("mask %x: entries not in order", mask)
		}
	}
}

// TestIndexCutShort: an index file cut short beneath its mapping is
// errNoIndex where the walk reads it (Linux maps it), not a SIGBUS.
func TestIndexCutShort(t *testing.T) {
	var ib indexBuilder
	for i := range 5000 {
		k := fmt.Appendf(nil, "key-%d", i)
		ib.add(k, uint64(i))
	}
	x, ok := ib.finish(deltaIndexHeader{DB: "d", Version: "v", Partitioner: "p"})
	if !ok {
		t.Fatal("finish")
	}
	y, path := writeAndLoad(t, x)
	if err := os.Truncate(path, 100); err != nil {
		t.Fatal(err)
	}
	err := readMapped(func() error {
		var sum uint64
		for j := range y.Entries {
			sum += y.rhAt(j)
		}
		if sum == 42 { // the reads kept
			return errors.New("sum")
		}
		return nil
	})
	if runtime.GOOS == "linux" && !errors.Is(err, errNoIndex) {
		t.Fatalf("a mapped index cut short: %v, want errNoIndex", err)
	}
}
