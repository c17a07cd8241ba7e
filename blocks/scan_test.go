package blocks

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/klauspost/compress/s2"
	bolt "go.etcd.io/bbolt"
)

// scanRecords are keys a listing must keep apart: '/', '%', NUL, bytes
// that are not UTF-8, a key that is another's prefix, a value larger than
// a block (a block of its own) and an empty value.
func scanRecords(n int) []record {
	r := rand.New(rand.NewPCG(3, 4))
	var recs []record
	for i := range n {
		k := fmt.Appendf(nil, "user/%04d/item%%%d", i%50, i)
		switch i % 7 {
		case 1:
			k = append(k, 0, byte(i))
		case 2:
			k = append([]byte{0xff, 0xfe, byte(i)}, k...)
		case 3:
			k = k[:len(k)-1] // a prefix of other keys
		}
		v := fmt.Appendf(nil, `{"i":%d,"r":%d}`, i, r.IntN(1e6))
		switch i {
		case 5:
			v = bytes.Repeat([]byte("large "), 2*BlockSize)
		case 6:
			v = []byte{}
		}
		recs = append(recs, record{k, v})
	}
	return recs
}

// sortedWant returns the records' last values by key, keys sorted.
func sortedWant(recs []record) (keys []string, want map[string][]byte) {
	want = map[string][]byte{}
	for _, r := range recs {
		want[string(r.k)] = r.v
	}
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys, want
}

// toFormat2 rewrites a blocks partition file as partition format 2
// wrote it: blocks of whole keys (tagRecords), no CRC.
func toFormat2(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		data := tx.Bucket(dataBucket)
		blocks := map[string][]byte{}
		err := data.ForEach(func(first, stored []byte) error {
			src, n, prefixed, err := blockPayload(stored, 1<<30)
			if err != nil || !prefixed {
				return fmt.Errorf("block %q: %v (prefixed %v)", first, err, prefixed)
			}
			raw, err := s2.Decode(make([]byte, n), src)
			if err != nil {
				return err
			}
			it := &Iter{block: raw, prefixed: true}
			var whole []byte
			for it.off < len(it.block) {
				if err := it.nextRecord(); err != nil {
					return err
				}
				k, v := it.keyBuf, it.block[it.valOff:it.off]
				whole = binary.AppendUvarint(whole, uint64(len(k)))
				whole = append(whole, k...)
				whole = binary.AppendUvarint(whole, uint64(len(v)))
				whole = append(whole, v...)
			}
			blocks[string(first)] = append([]byte{tagRecords}, s2.Encode(nil, whole)...)
			return nil
		})
		if err != nil {
			return err
		}
		for k, b := range blocks {
			if err := data.Put([]byte(k), b); err != nil {
				return err
			}
		}
		return tx.Bucket(metaBucket).Put([]byte(metaFormat), []byte("2"))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestScan: every layout (a record per key stored raw, with S2, with
// zstd; blocks of format 3 and of format 2) lists exactly the sorted
// keys of any range, with their values, and pages resumed after their
// last key add up to the whole range, under count and byte bounds.
func TestScan(t *testing.T) {
	recs := scanRecords(3000)
	src := t.TempDir()
	writeSeqFile(t, filepath.Join(src, "part-00000"), recs)
	keys, want := sortedWant(recs)
	type layout struct {
		name    string
		comp    Compression
		format2 bool
	}
	for _, l := range []layout{
		{"none", CompressionNone, false}, {"s2", CompressionS2, false}, {"zstd", CompressionZstd, false},
		{"s2-blocks", CompressionS2Blocks, false}, {"s2-blocks-format2", CompressionS2Blocks, true},
	} {
		t.Run(l.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openTestStore(t, dir, Options{SkipVerify: l.format2})
			build(t, s, BuildSpec{DB: "db", Version: "v1", Files: sourceFiles(t, src, []string{"part-00000"}), Compression: l.comp}).Close()
			if l.format2 {
				toFormat2(t, filepath.Join(dir, "dbs", "db", "v1", partitionFile(0)))
			}
			v, err := s.Open("db", "v1")
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			ranges := []Range{
				{},
				{Start: []byte("user/0007/")},
				{End: []byte("user/0003")},
				{Start: []byte("user/0010/"), End: []byte("user/0011/")},
				{Start: []byte(keys[100]), End: []byte(keys[900])},        // existing keys: start in, end out
				{Start: append([]byte(keys[5]), 0), End: []byte(keys[6])}, // between two keys: empty
				{Start: []byte{0xff, 0xff}},                               // after the last
				{Start: []byte("zzz"), End: []byte("a")},                  // end before start: empty
				{Start: []byte("\x00")},
			}
			for _, rg := range ranges {
				var exp []string
				for _, k := range keys {
					if k >= string(rg.Start) && (len(rg.End) == 0 || k < string(rg.End)) {
						exp = append(exp, k)
					}
				}
				recs, more, err := v.Scan(0, ScanOptions{Range: rg, Values: true})
				if err != nil || more {
					t.Fatalf("Scan(%q, %q) = more %v, %v", rg.Start, rg.End, more, err)
				}
				if len(recs) != len(exp) {
					t.Fatalf("Scan(%q, %q): %d records, want %d", rg.Start, rg.End, len(recs), len(exp))
				}
				for i, r := range recs {
					if string(r.Key) != exp[i] || !bytes.Equal(r.Value, want[exp[i]]) {
						t.Fatalf("Scan(%q, %q)[%d] = %q %.20q, want %q %.20q", rg.Start, rg.End, i, r.Key, r.Value, exp[i], want[exp[i]])
					}
				}
				// Pages of a few records, or a few bytes, resumed after
				// the last key, list the same.
				for _, o := range []ScanOptions{{Limit: 1}, {Limit: 7}, {Limit: 1000}, {MaxBytes: 64 << 10, Values: true}, {MaxBytes: 200}} {
					o.End = rg.End
					var got []string
					start := rg.Start
					for pages := 0; ; pages++ {
						if pages > len(keys)+1 {
							t.Fatalf("%+v: no end", o)
						}
						o.Start = start
						page, more, err := v.Scan(0, o)
						if err != nil {
							t.Fatalf("Scan(%q, %q, limit %d, bytes %d): %v", o.Start, o.End, o.Limit, o.MaxBytes, err)
						}
						for _, r := range page {
							got = append(got, string(r.Key))
							if o.Values && !bytes.Equal(r.Value, want[string(r.Key)]) {
								t.Fatalf("value of %q = %.20q, want %.20q", r.Key, r.Value, want[string(r.Key)])
							}
							if !o.Values && r.Value != nil {
								t.Fatalf("a value without Values")
							}
						}
						if o.Limit > 0 && len(page) > o.Limit {
							t.Fatalf("a page of %d records over the limit %d", len(page), o.Limit)
						}
						if !more {
							break
						}
						if len(page) == 0 {
							t.Fatalf("an empty page with more to come")
						}
						start = append(bytes.Clone(page[len(page)-1].Key), 0)
					}
					if !slices.Equal(got, exp) {
						t.Fatalf("pages (limit %d, bytes %d) of [%q, %q): %d keys, want %d", o.Limit, o.MaxBytes, rg.Start, rg.End, len(got), len(exp))
					}
				}
			}
		})
	}
}

// TestScanBounds: a record larger than MaxBytes alone is ErrTooLarge, a
// partition not held ErrPartitionNotHeld, a closed version ErrClosed.
func TestScanBounds(t *testing.T) {
	d := makeDataset(t, datasetOpts{files: 2, perFile: 200, seed: 9})
	s := openTestStore(t, t.TempDir(), Options{})
	v := build(t, s, BuildSpec{DB: "db", Version: "v1", Files: d.files(t), Compression: CompressionS2Blocks, Partitions: []int{1}})
	if _, _, err := v.Scan(1, ScanOptions{MaxBytes: 10, Values: true}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Scan of records over MaxBytes = %v, want ErrTooLarge", err)
	}
	if _, _, err := v.Scan(0, ScanOptions{}); !errors.Is(err, ErrPartitionNotHeld) {
		t.Errorf("Scan of a partition not held = %v, want ErrPartitionNotHeld", err)
	}
	if err := v.View(func(r *Reader) error {
		if r.Holds(0) || !r.Holds(1) || r.Manifest().Version != "v1" {
			t.Errorf("Reader holds 0 %v, 1 %v", r.Holds(0), r.Holds(1))
		}
		_, err := r.Iter(0, Range{})
		return err
	}); !errors.Is(err, ErrPartitionNotHeld) {
		t.Errorf("Iter of a partition not held = %v", err)
	}
	v.Close()
	if _, _, err := v.Scan(1, ScanOptions{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Scan after Close = %v, want ErrClosed", err)
	}
}

// TestScanCorrupt: a damaged block (one byte changed inside its S2 data:
// its CRC no longer matches) ends a scan with ErrCorrupt; the keys before
// it were listed, none after it, and the same file still serves Gets of
// other blocks.
func TestScanCorrupt(t *testing.T) {
	d := makeDataset(t, datasetOpts{files: 1, perFile: 2000, seed: 11, repetitive: true})
	dir := t.TempDir()
	s := openTestStore(t, dir, Options{SkipVerify: true})
	build(t, s, BuildSpec{DB: "db", Version: "v1", Files: d.files(t), Compression: CompressionS2Blocks}).Close()
	db, err := bolt.Open(filepath.Join(dir, "dbs", "db", "v1", partitionFile(0)), 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	var damaged []byte // the damaged block's first key
	err = db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket(dataBucket).Cursor()
		k, val := c.First()
		for range 10 {
			k, val = c.Next()
		}
		damaged = bytes.Clone(k)
		val = bytes.Clone(val)
		val[len(val)/2] ^= 0x55
		return tx.Bucket(dataBucket).Put(damaged, val)
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.Open("db", "v1")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	var listed int
	err = v.View(func(r *Reader) error {
		it, err := r.Iter(0, Range{})
		if err != nil {
			return err
		}
		for it.Next() {
			if bytes.Compare(it.Key(), damaged) >= 0 {
				t.Fatalf("key %x listed from the damaged block on", it.Key())
			}
			listed++
		}
		return it.Err()
	})
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("scan over a damaged block = %v, want ErrCorrupt", err)
	}
	if listed == 0 {
		t.Errorf("no key listed before the damaged block")
	}
	recs, _, err := v.Scan(0, ScanOptions{Limit: 1})
	if err != nil || len(recs) != 1 {
		t.Errorf("Scan of the first block after the damage = %d records, %v", len(recs), err)
	}
}

// TestScanResume: an iterator suspended every few records and resumed in
// a later View (Start just after the last key read, as a listing's next
// page asks) reads the same records as one iteration, in every layout
// and range; in the blocks layout the resumed iterator reads no block
// before its first Next moves on, and a Position of another version is
// ignored (Resume is then Iter).
func TestScanResume(t *testing.T) {
	recs := scanRecords(3000)
	src := t.TempDir()
	writeSeqFile(t, filepath.Join(src, "part-00000"), recs)
	keys, want := sortedWant(recs)
	for _, comp := range []Compression{CompressionNone, CompressionS2Blocks} {
		t.Run(string(comp), func(t *testing.T) {
			s := openTestStore(t, t.TempDir(), Options{})
			build(t, s, BuildSpec{DB: "db", Version: "v1", Files: sourceFiles(t, src, []string{"part-00000"}), Compression: comp}).Close()
			build(t, s, BuildSpec{DB: "db", Version: "v2", Files: sourceFiles(t, src, []string{"part-00000"}), Compression: comp}).Close()
			v1, err := s.Open("db", "v1")
			if err != nil {
				t.Fatal(err)
			}
			defer v1.Close()
			v2, err := s.Open("db", "v2")
			if err != nil {
				t.Fatal(err)
			}
			defer v2.Close()
			for _, rg := range []Range{{}, {Start: []byte("user/0007/"), End: []byte("user/0031")}, {End: []byte(keys[10])}} {
				var exp []string
				for _, k := range keys {
					if k >= string(rg.Start) && (len(rg.End) == 0 || k < string(rg.End)) {
						exp = append(exp, k)
					}
				}
				for _, step := range []int{1, 7, 100} {
					var got []string
					var pos Position
					resumed := 0
					start := rg.Start
					for views := 0; ; views++ {
						if views > len(keys)+2 {
							t.Fatalf("step %d: no end", step)
						}
						v := v1
						if views%5 == 4 {
							v = v2 // another version: the position is ignored
						}
						var ended bool
						err := v.View(func(r *Reader) error {
							it, err := r.Resume(0, Range{Start: start, End: rg.End}, pos)
							if err != nil {
								return err
							}
							if it.pending {
								resumed++
							}
							for n := 0; ; n++ {
								if !it.Next() {
									ended = true
									if it.Err() != nil {
										return it.Err()
									}
									// At the end: a position that resumes ended.
									if pos, ok := it.Suspend(); !ok || !pos.ended {
										return fmt.Errorf("an ended iterator suspends as %+v, %v", pos, ok)
									} else if it, err := r.Resume(0, Range{Start: []byte("a")}, pos); err != nil || it.Next() {
										return fmt.Errorf("an iterator resumed at the end has records (%v)", err)
									}
									return nil
								}
								if n == step {
									break // on a record not taken
								}
								got = append(got, string(it.Key()))
								val, err := it.Value()
								if err != nil {
									return err
								}
								if !bytes.Equal(val, want[string(it.Key())]) {
									return fmt.Errorf("value of %q = %.20q, want %.20q", it.Key(), val, want[string(it.Key())])
								}
							}
							var ok bool
							if pos, ok = it.Suspend(); !ok && comp == CompressionS2Blocks {
								return fmt.Errorf("an iterator on a record of the blocks layout does not suspend")
							}
							return nil
						})
						if err != nil {
							t.Fatalf("step %d, view %d: %v", step, views, err)
						}
						if ended {
							break
						}
						if len(got) > 0 {
							start = append([]byte(got[len(got)-1]), 0)
						}
					}
					if !slices.Equal(got, exp) {
						t.Fatalf("[%q, %q) by %d: %d keys, want %d", rg.Start, rg.End, step, len(got), len(exp))
					}
					if wantResumed := comp == CompressionS2Blocks && len(exp) > step; wantResumed != (resumed > 0) {
						t.Fatalf("[%q, %q) by %d: %d iterators resumed", rg.Start, rg.End, step, resumed)
					}
				}
			}
		})
	}
}
