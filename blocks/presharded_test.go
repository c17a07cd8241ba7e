package blocks

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
)

// pathological is SEQUINS.md's test vector: partition 19, alternate 11, for
// N = 20.
var pathological = []byte{0x70, 0x17, 0xad, 0x78, 0x8c, 0x5e, 0x85, 0xf1, 0x43, 0x27, 0xf8, 0x67}

// keysOf returns n random keys of partition p.
func keysOf(r *rand.Rand, p, numParts, n int) [][]byte {
	var out [][]byte
	for len(out) < n {
		k := []byte(fmt.Sprintf("key-%016x", r.Uint64()))
		if q, _, _ := (sequinsPartitioner{}).Partition(k, numParts); q == p {
			out = append(out, k)
		}
	}
	return out
}

// preshardedDataset writes n files, file i holding partition (i+shift)%n,
// as Cascading shifts them. The file of partition 11 starts with the
// pathological key when n is 20. edit may change a file's records.
func preshardedDataset(t *testing.T, n, shift, perFile int, edit func(file int, recs []record) []record) *dataset {
	t.Helper()
	if p, alt, _ := (sequinsPartitioner{}).Partition(pathological, 20); p != 19 || alt != 11 {
		t.Fatalf("pathological key: %d/%d", p, alt)
	}
	r := rand.New(rand.NewPCG(15, 16))
	d := &dataset{dir: t.TempDir(), want: map[string][]byte{}, n: n}
	for i := range n {
		p := (i + shift) % n
		var recs []record
		if n == 20 && p == 11 {
			recs = append(recs, record{pathological, []byte("pathological")})
		}
		for _, k := range keysOf(r, p, n, perFile) {
			recs = append(recs, record{k, []byte(fmt.Sprintf("value of %s in %d", k, p))})
		}
		if edit != nil {
			recs = edit(i, recs)
		}
		for _, rec := range recs {
			d.want[string(rec.k)] = rec.v
		}
		name := fmt.Sprintf("part-%05d", i)
		d.names = append(d.names, name)
		writeSeqFile(t, filepath.Join(d.dir, name), recs)
	}
	return d
}

func TestPresharded(t *testing.T) {
	const n, shift = 20, 9
	d := preshardedDataset(t, n, shift, 50, nil)
	for _, tt := range []struct {
		name  string
		parts []int
	}{
		{"all", nil},
		{"subset", []int{11, 0, 19}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := openTestStore(t, t.TempDir(), Options{})
			v := build(t, s, BuildSpec{DB: "db", Version: "v1", Files: d.files(t), Presharded: true, Partitions: tt.parts})
			m := v.Manifest()
			for i, f := range m.Files {
				p := (i + shift) % n
				if f.Partition != p {
					t.Errorf("file %d: partition %d, want %d", i, f.Partition, p)
				}
				read := tt.parts == nil || slices.Contains(tt.parts, p)
				if read != (f.Records >= 0) {
					t.Errorf("file %d (partition %d): records %d", i, p, f.Records)
				}
			}
			// The pathological key is stored in its file's partition, its
			// alternate.
			if v.Holds(11) {
				if got, err := v.Get(11, pathological); err != nil || string(got) != "pathological" {
					t.Errorf("Get(11, pathological) = %q, %v", got, err)
				}
			}
			var records int64
			for k, want := range d.want {
				p, _, _ := (sequinsPartitioner{}).Partition([]byte(k), n)
				if k == string(pathological) {
					p = 11 // checked above
				} else {
					got, err := v.Get(p, []byte(k))
					switch {
					case !v.Holds(p):
						if !errors.Is(err, ErrPartitionNotHeld) {
							t.Errorf("Get(%d) of a partition not held: %v", p, err)
						}
					case err != nil || string(got) != string(want):
						t.Errorf("Get(%d, %s) = %q, %v", p, k, got, err)
					}
				}
				if v.Holds(p) {
					records++
				}
			}
			if m.Records != records {
				t.Errorf("records %d, want %d", m.Records, records)
			}
		})
	}
}

func TestPreshardedErrors(t *testing.T) {
	const n, shift = 5, 2
	tests := []struct {
		name     string
		edit     func(file int, recs []record) []record
		parts    []int
		misplace bool // a *MisplacedKeyError naming part-00003 record 10
	}{
		{"misplaced key", func(file int, recs []record) []record {
			if file == 3 { // holds partition 0
				other := keysOf(rand.New(rand.NewPCG(1, 2)), 4, n, 1)[0]
				recs = slices.Insert(recs, 10, record{other, []byte("lost")})
			}
			return recs
		}, nil, true},
		{"misplaced key, only that partition held", func(file int, recs []record) []record {
			if file == 3 {
				other := keysOf(rand.New(rand.NewPCG(1, 2)), 4, n, 1)[0]
				recs = slices.Insert(recs, 10, record{other, []byte("lost")})
			}
			return recs
		}, []int{0}, true},
		{"two files, one partition", func(file int, recs []record) []record {
			if file == 4 { // replaces partition 1 by partition 0's keys
				return keysAsRecords(keysOf(rand.New(rand.NewPCG(3, 4)), 0, n, 5))
			}
			return recs
		}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := preshardedDataset(t, n, shift, 30, tt.edit)
			s := openTestStore(t, t.TempDir(), Options{})
			_, err := s.Build(context.Background(), BuildSpec{DB: "db", Version: "v1", Files: d.files(t),
				Partitioner: sequinsPartitioner{}, Presharded: true, Partitions: tt.parts})
			if !errors.Is(err, ErrBadInput) {
				t.Fatalf("err = %v, want ErrBadInput", err)
			}
			t.Log(err)
			var mk *MisplacedKeyError
			if errors.As(err, &mk) != tt.misplace {
				t.Fatalf("err = %v: misplaced %v", err, !tt.misplace)
			}
			if tt.misplace && (mk.File != "part-00003" || mk.Record != 10 || mk.Partition != 4 || mk.FilePartition != 0 || mk.Offset <= 0) {
				t.Errorf("misplaced key error %+v", mk)
			}
			if ms, _ := s.Versions(); len(ms) != 0 {
				t.Errorf("versions %v", ms)
			}
		})
	}
}

func keysAsRecords(keys [][]byte) []record {
	out := make([]record, len(keys))
	for i, k := range keys {
		out[i] = record{k, []byte("v")}
	}
	return out
}
