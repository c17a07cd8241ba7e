package partition

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/murmur3"
)

func TestSequinsHashVectors(t *testing.T) {
	for key, want := range map[string]int32{
		"The quick brown fox jumped over the lazy dog": 1953395701,
		"foo bar baz": 1892173108,
		"foobarbaz":   -1165917330,
		"":            0,
		"é":           6214, // UTF-8 bytes 0xc3 0xa9, unsigned: not Java's 233
	} {
		if got := SequinsHash([]byte(key)); got != want {
			t.Errorf("SequinsHash(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestSequinsPartitionVectors(t *testing.T) {
	pathological, _ := hex.DecodeString("7017ad788c5e85f14327f867")
	for _, tc := range []struct {
		name   string
		key    []byte
		p, alt int
	}{
		{"bar", []byte("bar"), 19, 19},
		{"fol", []byte("fol"), 11, 11},
		{"pathological", pathological, 19, 11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, alt := Sequins(tc.key, 20)
			if p != tc.p || alt != tc.alt {
				t.Fatalf("Sequins = (%d, %d), want (%d, %d)", p, alt, tc.p, tc.alt)
			}
		})
	}
}

// TestSequinsFixtures checks every key of the sequins fixtures against the
// partitions in EXPECTED.json, and that the Cascading-written 20-file set puts
// file i's keys in partition (i+9) mod 20 (SEQUINS.md §4).
func TestSequinsFixtures(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "sequins", "EXPECTED.json"))
	if err != nil {
		t.Fatal(err)
	}
	var expected struct {
		Files map[string]struct {
			Format  string          `json:"format"`
			N       int             `json:"num_partitions_N"`
			Records json.RawMessage `json:"records"`
		} `json:"files"`
	}
	type record struct {
		Key       string `json:"key"`
		Partition int    `json:"sequins_partition"`
	}
	if err := json.Unmarshal(raw, &expected); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for name, f := range expected.Files {
		if f.Format != "Hadoop SequenceFile" {
			continue
		}
		var records []record
		if err := json.Unmarshal(f.Records, &records); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, r := range records {
			if f.N == 0 {
				continue
			}
			if p, _ := Sequins([]byte(r.Key), f.N); p != r.Partition {
				t.Errorf("%s: key %q: partition %d, want %d", name, r.Key, p, r.Partition)
			}
			checked++
		}
		if dir, file := filepath.Split(name); strings.HasSuffix(dir, "baby-names/1/") && f.N == 20 {
			var i int
			if _, err := fmt.Sscanf(file, "part-%05d", &i); err != nil {
				t.Fatal(err)
			}
			for _, r := range records {
				if p, _ := Sequins([]byte(r.Key), 20); p != (i+9)%20 {
					t.Errorf("%s: key %q in partition %d, want %d", name, r.Key, p, (i+9)%20)
				}
			}
		}
	}
	if checked < 258 {
		t.Fatalf("checked %d keys, want at least the 258 of the 20-file set", checked)
	}
}

func TestHadoop(t *testing.T) {
	// hashBytes("a") = 31*1 + 97 = 128; a byte >= 0x80 counts as negative.
	for _, tc := range []struct {
		key  []byte
		n    int
		want int
	}{
		{[]byte("a"), 1000, 128},
		{[]byte("a"), 7, 128 % 7},
		{[]byte{0xff}, 1000, 30}, // 31 - 1
		{nil, 10, 1},
		{[]byte("ab"), 100000, (31*128 + 98) % 100000},
	} {
		if got := Hadoop(tc.key, tc.n); got != tc.want {
			t.Errorf("Hadoop(%x, %d) = %d, want %d", tc.key, tc.n, got, tc.want)
		}
	}
}

func TestMurmur3(t *testing.T) {
	// Reference values of MurmurHash3_x86_32 with seed 0.
	for key, want := range map[string]uint32{
		"":      0,
		"hello": 0x248bfa47,
		"The quick brown fox jumps over the lazy dog": 0x2e4ff723,
	} {
		if got := murmur3.Sum32([]byte(key)); got != want {
			t.Errorf("murmur3(%q) = %#x, want %#x", key, got, want)
		}
		if got := Murmur3([]byte(key), 1000); got != int(want%1000) {
			t.Errorf("Murmur3(%q, 1000) = %d, want %d", key, got, want%1000)
		}
	}
}

func TestRange(t *testing.T) {
	keys := [][]byte{nil, {0}, {0xff, 0xff, 0xff, 0xff}, []byte(strings.Repeat("x", 1024))}
	for _, n := range []int{1, 2, 7, 20, 1 << 20} {
		for _, k := range keys {
			for name, p := range map[string]int{"hadoop": Hadoop(k, n), "murmur3": Murmur3(k, n)} {
				if p < 0 || p >= n {
					t.Errorf("%s(%x, %d) = %d out of range", name, k, n, p)
				}
			}
			p, alt := Sequins(k, n)
			if p < 0 || p >= n || alt < 0 || alt >= n {
				t.Errorf("Sequins(%x, %d) = (%d, %d) out of range", k, n, p, alt)
			}
		}
	}
}

func FuzzSequins(f *testing.F) {
	f.Add([]byte("bar"), 20)
	f.Add([]byte{0x70, 0x17, 0xad, 0x78, 0x8c, 0x5e, 0x85, 0xf1, 0x43, 0x27, 0xf8, 0x67}, 20)
	f.Fuzz(func(t *testing.T, key []byte, n int) {
		if n <= 0 {
			return
		}
		p, alt := Sequins(key, n)
		if p < 0 || p >= n || alt < 0 || alt >= n {
			t.Fatalf("Sequins(%x, %d) = (%d, %d)", key, n, p, alt)
		}
		if h := SequinsHash(key); h <= 1<<31-1-32 && alt != p {
			t.Fatalf("non-pathological key %x has alternate %d != %d", key, alt, p)
		}
	})
}

var sink int

func BenchmarkPartition(b *testing.B) {
	key := []byte("0123456789abcdef")
	for _, bc := range []struct {
		name string
		fn   func([]byte, int) int
	}{
		{"sequins", func(k []byte, n int) int { p, _ := Sequins(k, n); return p }},
		{"hadoop", Hadoop},
		{"murmur3", Murmur3},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				sink += bc.fn(key, 16)
			}
		})
	}
}
