package boltpack

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"
)

type kv struct{ k, v []byte }

// sortedKVs returns n distinct random keys in order with values of
// [minV, maxV] bytes.
func sortedKVs(seed uint64, n, minK, maxK, minV, maxV int) []kv {
	r := rand.New(rand.NewPCG(seed, 1))
	seen := map[string]bool{}
	var out []kv
	for len(out) < n {
		k := make([]byte, minK+r.IntN(maxK-minK+1))
		for i := range k {
			k[i] = byte(r.IntN(256))
		}
		if seen[string(k)] {
			continue
		}
		seen[string(k)] = true
		v := make([]byte, minV+r.IntN(maxV-minV+1))
		for i := range v {
			v[i] = byte(r.IntN(256))
		}
		out = append(out, kv{k, v})
	}
	slices.SortFunc(out, func(a, b kv) int { return bytes.Compare(a.k, b.k) })
	return out
}

func write(t testing.TB, path string, pageSize int, buckets map[string][]kv) {
	t.Helper()
	w, err := Create(path, Options{PageSize: pageSize, BufferSize: 3 * pageSize})
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(buckets))
	for n := range buckets {
		names = append(names, n)
	}
	slices.Sort(names)
	slices.Reverse(names) // any bucket order works
	for _, n := range names {
		if err := w.Bucket([]byte(n)); err != nil {
			t.Fatal(err)
		}
		for _, e := range buckets[n] {
			if err := w.Put(e.k, e.v); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// verify opens the file with bbolt, runs its consistency check and compares
// every bucket's content, by iteration and by Get.
func verify(t testing.TB, path string, readOnly bool, buckets map[string][]kv) {
	t.Helper()
	db, err := bolt.Open(path, 0o644, &bolt.Options{ReadOnly: readOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("check: %v", err)
		}
		var names []string
		if err := tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			names = append(names, string(name))
			return nil
		}); err != nil {
			return err
		}
		if len(names) != len(buckets) {
			t.Errorf("buckets %q, want %d", names, len(buckets))
		}
		for n, want := range buckets {
			b := tx.Bucket([]byte(n))
			if b == nil {
				return fmt.Errorf("bucket %q missing", n)
			}
			i := 0
			if err := b.ForEach(func(k, v []byte) error {
				if i >= len(want) || !bytes.Equal(k, want[i].k) || !bytes.Equal(v, want[i].v) {
					return fmt.Errorf("bucket %q: element %d differs", n, i)
				}
				i++
				return nil
			}); err != nil {
				return err
			}
			if i != len(want) {
				return fmt.Errorf("bucket %q: %d elements, want %d", n, i, len(want))
			}
			for _, e := range want {
				if got := b.Get(e.k); !bytes.Equal(got, e.v) {
					return fmt.Errorf("bucket %q: Get(%x) wrong", n, e.k)
				}
			}
			if b.Get([]byte("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff")) != nil {
				return fmt.Errorf("bucket %q: found a missing key", n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestWriterBboltReads(t *testing.T) {
	data := func(kvs []kv) func() map[string][]kv {
		return func() map[string][]kv { return map[string][]kv{"data": kvs} }
	}
	gen := func(seed uint64, n, minK, maxK, minV, maxV int) func() map[string][]kv {
		return func() map[string][]kv {
			return map[string][]kv{"data": sortedKVs(seed, n, minK, maxK, minV, maxV)}
		}
	}
	tests := []struct {
		name     string
		pageSize int
		buckets  func() map[string][]kv // generated in the subtest
	}{
		{"empty file", 4096, func() map[string][]kv { return nil }},
		{"empty bucket", 4096, data(nil)},
		{"one key", 4096, data([]kv{{[]byte("k"), []byte("v")}})},
		{"empty value", 4096, data([]kv{{[]byte("k"), nil}, {[]byte("l"), []byte{}}})},
		{"one leaf", 4096, gen(1, 20, 4, 16, 0, 100)},
		{"two levels", 4096, gen(2, 2000, 8, 24, 50, 150)},
		{"three levels", 4096, gen(3, 40000, 16, 16, 90, 110)},
		{"16k pages", 16384, gen(4, 40000, 16, 16, 90, 110)},
		{"overflow values", 4096, gen(5, 300, 8, 16, 0, 20000)},
		{"overflow keys", 1024, gen(6, 300, 1, 3000, 0, 100)},
		{"tiny elements", 4096, gen(7, 50000, 1, 4, 0, 0)},
		{"two buckets", 4096, func() map[string][]kv {
			return map[string][]kv{
				"data": sortedKVs(8, 5000, 16, 16, 100, 100),
				"meta": {{[]byte("dict"), bytes.Repeat([]byte("d"), 16384)}, {[]byte("format"), []byte("1")}},
				"zzz":  nil,
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.bolt")
			buckets := tt.buckets()
			write(t, path, tt.pageSize, buckets)
			verify(t, path, true, buckets)
		})
	}
}

// A packed file is a normal bbolt file: bbolt can write to it afterwards.
func TestWriterBboltWritesAfterwards(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.bolt")
	data := sortedKVs(9, 10000, 16, 16, 100, 100)
	write(t, path, 4096, map[string][]kv{"data": data})

	db, err := bolt.Open(path, 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	extra := sortedKVs(10, 3000, 17, 20, 10, 300)
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("data"))
		for i, e := range extra {
			if err := b.Put(e.k, e.v); err != nil {
				return err
			}
			if i%3 == 0 {
				if err := b.Delete(data[i].k); err != nil {
					return err
				}
			}
		}
		_, err := tx.CreateBucket([]byte("other"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	want := map[string][]kv{"other": nil}
	var all []kv
	for i, e := range data {
		if i >= len(extra) || i%3 != 0 {
			all = append(all, e)
		}
	}
	all = append(all, extra...)
	slices.SortFunc(all, func(a, b kv) int { return bytes.Compare(a.k, b.k) })
	want["data"] = all
	verify(t, path, false, want)
}

func TestWriterErrors(t *testing.T) {
	w, err := Create(filepath.Join(t.TempDir(), "x.bolt"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Put([]byte("a"), nil); !errors.Is(err, ErrNoBucket) {
		t.Errorf("Put before Bucket: %v", err)
	}
	if err := w.Bucket([]byte("b")); err != nil {
		t.Fatal(err)
	}
	if err := w.Bucket([]byte("b")); !errors.Is(err, ErrBucketExists) {
		t.Errorf("Bucket twice: %v", err)
	}
	tests := []struct {
		key  []byte
		want error
	}{
		{nil, ErrKeyRequired},
		{make([]byte, MaxKeySize+1), ErrKeyTooLarge},
		{[]byte("m"), nil},
		{[]byte("m"), ErrKeyOrder},
		{[]byte("a"), ErrKeyOrder},
		{[]byte("n"), nil},
	}
	for _, tt := range tests {
		if err := w.Put(tt.key, nil); !errors.Is(err, tt.want) {
			t.Errorf("Put(%.10q) = %v, want %v", tt.key, err, tt.want)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := w.Put([]byte("z"), nil); err == nil {
		t.Error("Put after Finish succeeded")
	}
}

// BenchmarkWrite compares the packer with bbolt's Put on the same sorted
// keys (16-byte keys, 100-byte values, FillPercent 1.0, 10k keys per
// transaction, no syncs).
func BenchmarkWrite(b *testing.B) {
	data := sortedKVs(11, 200_000, 16, 16, 100, 100)
	b.Run("boltpack", func(b *testing.B) {
		dir := b.TempDir()
		for b.Loop() {
			w, err := Create(filepath.Join(dir, "x.bolt"), Options{})
			if err != nil {
				b.Fatal(err)
			}
			if err := w.Bucket([]byte("data")); err != nil {
				b.Fatal(err)
			}
			for _, e := range data {
				if err := w.Put(e.k, e.v); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Finish(); err != nil {
				b.Fatal(err)
			}
			w.Close()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(data)), "ns/key")
	})
	b.Run("bbolt", func(b *testing.B) {
		dir := b.TempDir()
		for b.Loop() {
			path := filepath.Join(dir, "x.bolt")
			os.Remove(path)
			db, err := bolt.Open(path, 0o644, &bolt.Options{NoSync: true, NoFreelistSync: true, NoGrowSync: true, InitialMmapSize: 64 << 20})
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < len(data); i += 10000 {
				err := db.Update(func(tx *bolt.Tx) error {
					bk, err := tx.CreateBucketIfNotExists([]byte("data"))
					if err != nil {
						return err
					}
					bk.FillPercent = 1.0
					for _, e := range data[i:min(i+10000, len(data))] {
						if err := bk.Put(e.k, e.v); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			db.Close()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(data)), "ns/key")
	})
}

// FuzzWriter writes what the input describes (a page size, then keys and
// values of lengths from the input, up to overflow pages) and checks
// that bbolt reads it back whole and that its consistency check passes.
// Keys are made distinct and sorted, as Put requires.
func FuzzWriter(f *testing.F) {
	f.Add([]byte{1, 3, 'a', 'b', 'c', 2, 'v', 'w'})
	f.Add(append([]byte{0}, bytes.Repeat([]byte{200, 'k', 'e', 'y', 0}, 40)...))
	f.Add(append([]byte{2, 1, 'x', 255}, bytes.Repeat([]byte{'v'}, 255)...))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		pageSize := []int{1024, 4096, 16384}[int(in[0])%3]
		in = in[1:]
		seen := map[string]bool{}
		var kvs []kv
		total := 0 // bytes, bounded so that an input runs in milliseconds
		for len(in) > 0 && len(kvs) < 500 && total < 256<<10 {
			// A key of 1-32 bytes and a value of up to 255 bytes, each
			// repeated to reach overflow sizes when the length byte says.
			kl := int(in[0])%32 + 1
			rep := 1 + int(in[0])/32*int(in[0])/32 // up to 64x
			in = in[1:]
			k := bytes.Repeat(in[:min(kl, len(in))], rep)
			in = in[min(kl, len(in)):]
			if len(k) == 0 {
				break
			}
			var v []byte
			if len(in) > 0 {
				vl := int(in[0])
				in = in[1:]
				v = bytes.Repeat(in[:min(vl, len(in))], 1+vl%16)
				in = in[min(vl, len(in)):]
			}
			if !seen[string(k)] {
				seen[string(k)] = true
				kvs = append(kvs, kv{k, v})
				total += len(k) + len(v)
			}
		}
		slices.SortFunc(kvs, func(a, b kv) int { return bytes.Compare(a.k, b.k) })
		path := filepath.Join(t.TempDir(), "f.bolt")
		buckets := map[string][]kv{"data": kvs}
		write(t, path, pageSize, buckets)
		verify(t, path, true, buckets)
	})
}
