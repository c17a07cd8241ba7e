package blocks

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

// TestEach: Each calls fn with every record of the range in key order
// (what Get serves), stops at fn's error and returns it, and returns
// ErrPartitionNotHeld for a partition not held; its iterator is
// released on fn's error and on fn's panic.

func TestEach(t *testing.T) {
	d := makeDataset(t, datasetOpts{files: 2, perFile: 500, seed: 21})
	s := openTestStore(t, t.TempDir(), Options{})
	v := build(t, s, BuildSpec{DB: "db", Version: "v1", Files: d.files(t), Compression: CompressionS2Blocks, Partitions: []int{1}})
	var keys [][]byte
	err := v.View(func(r *Reader) error {
		return r.Each(1, Range{}, func(k, val []byte) error {
			if want := d.want[string(k)]; !bytes.Equal(val, want) {
				t.Errorf("Each: %x = %x, want %x", k, val, want)
			}
			keys = append(keys, bytes.Clone(k))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(keys)) != v.Manifest().Records || !slices.IsSortedFunc(keys, bytes.Compare) {
		t.Fatalf("Each: %d keys (sorted %v), want the %d records in key order", len(keys), slices.IsSortedFunc(keys, bytes.Compare), v.Manifest().Records)
	}

	rg := Range{Start: keys[10], End: keys[20]}
	var in [][]byte
	stop := errors.New("stop")
	err = v.View(func(r *Reader) error {
		if err := r.Each(1, rg, func(k, _ []byte) error {
			in = append(in, bytes.Clone(k))
			return nil
		}); err != nil {
			return err
		}
		n := 0
		return r.Each(1, Range{}, func([]byte, []byte) error {
			if n++; n == 3 {
				return stop
			}
			return nil
		})
	})
	if !errors.Is(err, stop) {
		t.Errorf("Each after fn's error = %v, want fn's", err)
	}
	if !slices.EqualFunc(in, keys[10:20], bytes.Equal) {
		t.Errorf("Each of [key 10, key 20) = %d keys, want those 10", len(in))
	}

	err = v.View(func(r *Reader) error {
		return r.Each(0, Range{}, func([]byte, []byte) error { return nil })
	})
	if !errors.Is(err, ErrPartitionNotHeld) {
		t.Errorf("Each of a partition not held = %v, want ErrPartitionNotHeld", err)
	}

	func() {
		defer func() {
			if recover() == nil {
				t.Error("Each: fn's panic was lost")
			}
		}()
		_ = v.View(func(r *Reader) error {
			return r.Each(1, Range{}, func([]byte, []byte) error { panic("fn") })
		})
	}()
	// Close waits for every read transaction: it returns only if the
	// iterators of fn's error and fn's panic were released.
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
}
