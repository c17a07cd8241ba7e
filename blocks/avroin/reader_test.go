package avroin

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// pythonAvro returns a Python with Apache Avro's implementation and the
// snappy and zstandard modules (make deps-test installs Debian's
// python3-avro, python3-snappy and python3-zstandard), or skips.
func pythonAvro(t *testing.T) string {
	t.Helper()
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(py, "-c", "import avro.datafile, snappy, zstandard").Run() == nil {
			return py
		}
	}
	t.Skip("no python3 with avro, snappy and zstandard: make deps-test installs them")
	return ""
}

type expectation struct {
	File       string
	Key, Value string
	Records    [][]string
}

// writtenByApache runs testdata/write.py and returns its directory.
func writtenByApache(t *testing.T) (string, map[string]expectation) {
	py := pythonAvro(t)
	dir := t.TempDir()
	if out, err := exec.Command(py, "testdata/write.py", dir).CombinedOutput(); err != nil {
		t.Fatalf("write.py: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	exp := map[string]expectation{}
	for name, m := range raw {
		var e struct {
			File, Key, Value string
			Records          [][]string
		}
		if err := json.Unmarshal(m, &e); err != nil {
			t.Fatal(err)
		}
		if e.File == "" {
			e.File = name
		}
		exp[name] = expectation{File: e.File, Key: e.Key, Value: e.Value, Records: e.Records}
	}
	return dir, exp
}

func readAll(t *testing.T, path string, opts Options) ([][2][]byte, error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := NewReader(f, filepath.Base(path), opts)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out [][2][]byte
	for r.Next() {
		out = append(out, [2][]byte{bytes.Clone(r.Key()), bytes.Clone(r.Value())})
	}
	return out, r.Err()
}

// TestApacheAvro reads files written by Apache Avro's Python
// implementation with every codec, and typed fields, and compares every
// record with what the writer was given.
func TestApacheAvro(t *testing.T) {
	dir, exp := writtenByApache(t)
	if len(exp) != 7 {
		t.Fatalf("%d expectations", len(exp))
	}
	for name, e := range exp {
		t.Run(name, func(t *testing.T) {
			got, err := readAll(t, filepath.Join(dir, e.File), Options{Key: e.Key, Value: e.Value})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(e.Records) {
				t.Fatalf("%d records, want %d", len(got), len(e.Records))
			}
			for i, r := range e.Records {
				if hex.EncodeToString(got[i][0]) != r[0] || hex.EncodeToString(got[i][1]) != r[1] {
					t.Fatalf("record %d = %x %x, want %s %s", i, got[i][0], got[i][1], r[0], r[1])
				}
			}
		})
	}
}

// TestErrors: malformed files and missing fields are errors naming the
// file and the reason; flipped bytes never panic.
func TestErrors(t *testing.T) {
	dir, _ := writtenByApache(t)
	good, err := os.ReadFile(filepath.Join(dir, "kv-snappy.avro"))
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
	hugeBlock := append(bytes.Clone(good[:headerLen(t, good)]), 0x02, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f)
	tests := []struct {
		name, path string
		opts       Options
		want       string
	}{
		{"no key field", filepath.Join(dir, "kv-null.avro"), Options{Key: "id"}, `no key field "id"`},
		{"array field", filepath.Join(dir, "typed.avro"), Options{Key: "id", Value: "tags"}, `value field "tags": type array`},
		{"record field", filepath.Join(dir, "typed.avro"), Options{Key: "nested", Value: "id"}, `key field "nested": type record`},
		{"truncated", write("truncated.avro", good[:len(good)/2]), Options{}, "unexpected EOF"},
		{"bad magic", write("zeros.avro", make([]byte, 4096)), Options{}, "not an avro container file"},
		{"huge block", write("huge.avro", hugeBlock), Options{}, "at most"},
		{"bad sync", write("sync.avro", append(bytes.Clone(good[:len(good)-1]), good[len(good)-1]^1)), Options{}, "sync marker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readAll(t, tt.path, tt.opts)
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrFormat) {
				t.Fatalf("err = %v, want an *Error", err)
			}
			if e.File != filepath.Base(tt.path) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to name %s and say %q", err, filepath.Base(tt.path), tt.want)
			}
		})
	}
	for _, name := range []string{"typed.avro"} {
		good, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(good); i += 5 {
			b := bytes.Clone(good)
			b[i] ^= 0x6b
			p := write("flipped.avro", b)
			if _, err := readAll(t, p, Options{Key: "id", Value: "name"}); err != nil && !errors.Is(err, ErrFormat) {
				t.Fatalf("byte %d: %v is not ErrFormat", i, err)
			}
		}
	}
}

// headerLen is the length of a container file's header: up to and with
// its sync marker, the 16 bytes that also end every block.
func headerLen(t *testing.T, b []byte) int {
	sync := b[len(b)-16:]
	i := bytes.Index(b, sync)
	if i < 0 {
		t.Fatal("no sync marker")
	}
	return i + 16
}
