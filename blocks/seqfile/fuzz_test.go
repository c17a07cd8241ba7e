package seqfile

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// seedFiles returns the fixture SequenceFiles and, for every writer mode,
// a small file of several blocks or sync intervals.
func seedFiles(tb testing.TB) map[string][]byte {
	tb.Helper()
	seeds := map[string][]byte{}
	err := filepath.WalkDir(testdataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, ".json") || strings.HasSuffix(path, ".md") {
			return err
		}
		b, err := os.ReadFile(path)
		if err == nil && len(b) > 0 {
			rel, _ := filepath.Rel(testdataDir, path)
			seeds[filepath.ToSlash(rel)] = b
		}
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	recs := append([]record{{"", ""}, {"k", "\x00\xff"}}, genRecords(40, 8, 60)...)
	for _, mode := range writerModes() {
		opts := mode.opts
		opts.BlockSize = 600
		opts.Sync = [16]byte{'s', 'y', 'n', 'c'}
		seeds["writer/"+mode.name] = writeFile(tb, opts, recs)
		opts.KeyClass, opts.ValueClass = Text, Text
		opts.Metadata = []Metadata{{"k", "v"}}
		seeds["writer/text/"+mode.name] = writeFile(tb, opts, recs[:5])
	}
	return seeds
}

// FuzzReader feeds arbitrary bytes to the Reader. It checks that nothing
// panics or hangs, that every error is an *Error, and that the records
// returned are consistent: each unwrapped field is its raw field less a
// short prefix, Offset never goes back or past the input, and writing the
// records again and reading them back gives the same records.
func FuzzReader(f *testing.F) {
	for _, b := range seedFiles(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReaderOptions(bytes.NewReader(data), "fuzz", ReaderOptions{MaxSize: 1 << 20, BufferSize: 4096})
		if err != nil {
			checkFuzzError(t, err, data)
			return
		}
		var recs []record
		last := r.Offset()
		for r.Next() {
			for _, kv := range [][2][]byte{{r.RawKey(), r.Key()}, {r.RawValue(), r.Value()}} {
				raw, un := kv[0], kv[1]
				if !bytes.HasSuffix(raw, un) || len(raw)-len(un) > maxVIntLen {
					t.Fatalf("unwrapped %q is not a suffix of raw %q", un, raw)
				}
			}
			if off := r.Offset(); off < last || off > int64(len(data)) {
				t.Fatalf("Offset %d after %d, input %d bytes", off, last, len(data))
			}
			last = r.Offset()
			recs = append(recs, record{string(r.Key()), string(r.Value())})
		}
		if r.Records() != int64(len(recs)) {
			t.Fatalf("Records() = %d, returned %d", r.Records(), len(recs))
		}
		if err := r.Err(); err != nil {
			checkFuzzError(t, err, data)
		} else if r.Offset() != int64(len(data)) {
			t.Fatalf("clean end at offset %d of %d", r.Offset(), len(data))
		}
		if r.Next() {
			t.Fatal("Next returned true after the end")
		}
		roundTrip(t, r.Header(), recs)
	})
}

func checkFuzzError(t *testing.T, err error, data []byte) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *Error", err, err)
	}
	if e.Offset < 0 || e.Offset > int64(len(data)) {
		t.Fatalf("error offset %d outside the %d-byte input: %v", e.Offset, len(data), err)
	}
}

// roundTrip writes recs with h's classes, uncompressed, and checks that they
// read back unchanged.
func roundTrip(t *testing.T, h *Header, recs []record) {
	t.Helper()
	opts := WriterOptions{KeyClass: h.KeyClass, ValueClass: h.ValueClass, Metadata: h.Metadata, Sync: h.Sync}
	if opts.KeyClass == "" || opts.ValueClass == "" {
		return // the Writer would substitute BytesWritable
	}
	data := writeFile(t, opts, recs)
	_, got, err := readAll(t, data, ReaderOptions{})
	if err != nil {
		t.Fatalf("re-reading the records: %v", err)
	}
	if !equalRecords(got, recs) {
		t.Fatalf("round trip changed the records")
	}
}

// FuzzDecompress feeds arbitrary bytes to each codec's decoder, which the
// Reader reaches only through well-formed framing: it must not panic, must
// respect the size limit, and what it decodes must survive a round trip
// through the matching compressor.
func FuzzDecompress(f *testing.F) {
	kinds := []codecKind{codecZlib, codecGzip, codecSnappy, codecZstd, codecBzip2}
	for _, k := range kinds {
		c, err := newCompressor(k)
		if err != nil {
			f.Fatal(err)
		}
		for _, src := range []string{"", "Practice", string(bytes.Repeat([]byte("abc"), 5000))} {
			out, err := c.compress(nil, []byte(src))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(byte(k), out)
		}
	}
	const limit = 64 << 10
	f.Fuzz(func(t *testing.T, k byte, data []byte) {
		kind := kinds[int(k)%len(kinds)]
		d := &decompressor{kind: kind, limit: limit, max: limit}
		out, err := d.decompress(nil, data)
		if err != nil {
			return
		}
		if len(out) > limit {
			t.Fatalf("decoded %d bytes, limit %d", len(out), limit)
		}
		c, err := newCompressor(kind)
		if err != nil {
			t.Fatal(err)
		}
		again, err := c.compress(nil, out)
		if err != nil {
			t.Fatal(err)
		}
		back, err := d.decompress(nil, again)
		if err != nil || !bytes.Equal(back, out) {
			t.Fatalf("round trip: err %v, equal %v", err, bytes.Equal(back, out))
		}
	})
}
