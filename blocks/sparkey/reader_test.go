package sparkey

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type rec struct{ k, v string }

func readLog(t *testing.T, path string) ([]rec, Header, error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := NewReader(f, filepath.Base(path))
	if err != nil {
		return nil, Header{}, err
	}
	defer r.Close()
	var out []rec
	for r.Next() {
		out = append(out, rec{string(r.Key()), string(r.Value())})
	}
	return out, r.Header(), r.Err()
}

func checkIndex(t *testing.T, path string, id uint32) error {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return CheckIndex(f, filepath.Base(path), id)
}

// TestSequinsFiles reads sequins' own test files.
func TestSequinsFiles(t *testing.T) {
	want := map[string][]rec{
		"part0-file0": {{"Alice", "Practice"}, {"Betty", "White"}},
		"part0-file1": {{"Charlie", "Chaplin"}, {"Dylan", "Thomas"}},
		"part1":       nil,
	}
	for base, w := range want {
		got, h, err := readLog(t, filepath.Join("testdata", "sequins", base+".spl"))
		if err != nil {
			t.Fatal(err)
		}
		if h.Compression != CompressionSnappy || len(got) != len(w) {
			t.Fatalf("%s: header %+v, %d records, want snappy and %d", base, h, len(got), len(w))
		}
		for i := range w {
			if got[i] != w[i] {
				t.Fatalf("%s: record %d = %q, want %q", base, i, got[i], w[i])
			}
		}
		if err := checkIndex(t, filepath.Join("testdata", "sequins", base+".spi.sz"), h.FileID); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCLibraryFiles reads logs the Sparkey C library wrote (gen.sh), of
// every compression and several block sizes, values longer than blocks,
// and compares every put with what the library was given.
func TestCLibraryFiles(t *testing.T) {
	logs, err := filepath.Glob(filepath.Join("testdata", "sparkey-c", "*", "*.spl"))
	if err != nil || len(logs) < 8 {
		t.Fatalf("%d logs: %v", len(logs), err)
	}
	comps := map[uint32]bool{}
	for _, path := range logs {
		base := strings.TrimSuffix(path, ".spl")
		got, h, err := readLog(t, path)
		if err != nil {
			t.Fatal(err)
		}
		comps[h.Compression] = true
		want := expected(t, base+".expected")
		if len(got) != len(want) {
			t.Fatalf("%s: %d records, want %d", path, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s: record %d differs", path, i)
			}
		}
		if err := checkIndex(t, base+".spi.sz", h.FileID); err != nil {
			t.Fatal(err)
		}
	}
	if len(comps) != 3 {
		t.Fatalf("compressions read: %v, want none, snappy and zstd", comps)
	}
}

func expected(t *testing.T, path string) []rec {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []rec
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		kh, vh, _ := strings.Cut(sc.Text(), " ")
		k, err1 := hex.DecodeString(kh)
		v, err2 := hex.DecodeString(vh)
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: bad line", path)
		}
		out = append(out, rec{string(k), string(v)})
	}
	return out
}

// TestErrors: malformed logs and indexes are errors naming the file and
// the reason; flipped bytes never panic.
func TestErrors(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("testdata", "sparkey-c", "snappy-4k", "part-00000")
	good, err := os.ReadFile(src + ".spl")
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	deletes := bytes.Clone(good)
	deletes[24] = 1
	hugeBlock := bytes.Clone(good)
	hugeBlock[68], hugeBlock[69], hugeBlock[70], hugeBlock[71] = 0, 0, 0, 0x40
	tests := []struct{ name, path, want string }{
		{"truncated", write("truncated.spl", good[:len(good)/2]), "truncated"},
		{"header only, cut", write("cut.spl", good[:40]), "shorter than a log header"},
		{"bad magic", write("zeros.spl", make([]byte, 4096)), "not a sparkey log"},
		{"deletes", write("deletes.spl", deletes), "deletes"},
		{"huge block size", write("block.spl", hugeBlock), "block size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := readLog(t, tt.path)
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrFormat) || e.File != filepath.Base(tt.path) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want an *Error naming %s and saying %q", err, filepath.Base(tt.path), tt.want)
			}
		})
	}
	_, h, err := readLog(t, src+".spl")
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join("testdata", "sparkey-c", "none", "part-00000.spi.sz")
	if err := checkIndex(t, other, h.FileID); err == nil || !strings.Contains(err.Error(), "indexes log") {
		t.Fatalf("another log's index: %v", err)
	}
	if err := checkIndex(t, write("x.spi.sz", []byte("not snappy")), h.FileID); !errors.Is(err, ErrFormat) {
		t.Fatalf("a bad index: %v", err)
	}
	small, err := os.ReadFile(filepath.Join("testdata", "sparkey-c", "snappy-64", "part-00000.spl"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(small); i += 7 {
		b := bytes.Clone(small)
		b[i] ^= 0x35
		if _, _, err := readLog(t, write("flipped.spl", b)); err != nil && !errors.Is(err, ErrFormat) {
			t.Fatalf("byte %d: %v is not ErrFormat", i, err)
		}
	}
}
