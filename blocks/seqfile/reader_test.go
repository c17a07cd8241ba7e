package seqfile

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const testdataDir = "../../testdata"

type record struct{ Key, Value string }

// readAll reads every record of data. It returns the records read and the
// reader's error, and fails the test if that error is not an *Error.
func readAll(tb testing.TB, data []byte, opts ReaderOptions) (*Header, []record, error) {
	tb.Helper()
	r, err := NewReaderOptions(bytes.NewReader(data), "test", opts)
	if err != nil {
		checkError(tb, err)
		return nil, nil, err
	}
	var recs []record
	for r.Next() {
		recs = append(recs, record{string(r.Key()), string(r.Value())})
	}
	if r.Records() != int64(len(recs)) {
		tb.Fatalf("Records() = %d, want %d", r.Records(), len(recs))
	}
	if err := r.Err(); err != nil {
		checkError(tb, err)
		return r.Header(), recs, err
	}
	if r.Offset() != int64(len(data)) {
		tb.Fatalf("Offset() = %d at EOF, want %d", r.Offset(), len(data))
	}
	return r.Header(), recs, nil
}

func checkError(tb testing.TB, err error) {
	tb.Helper()
	var e *Error
	if !errors.As(err, &e) {
		tb.Fatalf("error %v (%T) is not an *Error", err, err)
	}
	if !strings.HasPrefix(e.Error(), "seqfile: ") {
		tb.Fatalf("error %q lacks the package prefix", e.Error())
	}
}

func readFile(tb testing.TB, rel string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(testdataDir, filepath.FromSlash(rel)))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

type expectedFile struct {
	Format     string            `json:"format"`
	Version    int               `json:"version"`
	KeyClass   string            `json:"key_class"`
	ValueClass string            `json:"value_class"`
	Compress   string            `json:"compression"`
	Codec      *string           `json:"codec"`
	Metadata   map[string]string `json:"metadata"`
	Size       int               `json:"size"`
	Error      string            `json:"error"`
	Records    json.RawMessage   `json:"records"`
}

type expectedRecord struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// TestExpected reads every file EXPECTED.json lists and compares headers and
// records.
func TestExpected(t *testing.T) {
	var exp struct {
		Files map[string]expectedFile `json:"files"`
	}
	if err := json.Unmarshal(readFile(t, "sequins/EXPECTED.json"), &exp); err != nil {
		t.Fatal(err)
	}
	if len(exp.Files) < 40 {
		t.Fatalf("EXPECTED.json lists %d files", len(exp.Files))
	}
	for path, want := range exp.Files {
		t.Run(path, func(t *testing.T) {
			if strings.HasPrefix(want.Format, "sparkey") {
				t.Skip("Sparkey files are not SequenceFiles and are not copied")
			}
			data := readFile(t, "sequins/"+path)
			if len(data) != want.Size {
				t.Fatalf("size %d, want %d", len(data), want.Size)
			}
			h, recs, err := readAll(t, data, ReaderOptions{})
			if want.Format != "Hadoop SequenceFile" {
				if !errors.Is(err, ErrNotSequenceFile) {
					t.Fatalf("err = %v, want ErrNotSequenceFile", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			codec := ""
			if want.Codec != nil {
				codec = *want.Codec
			}
			if int(h.Version) != want.Version || h.KeyClass != want.KeyClass || h.ValueClass != want.ValueClass ||
				h.Compression.String() != want.Compress || h.Codec != codec || len(h.Metadata) != len(want.Metadata) {
				t.Errorf("header %+v, want %+v", h, want)
			}
			for _, m := range h.Metadata {
				if want.Metadata[m.Key] != m.Value {
					t.Errorf("metadata %q = %q, want %q", m.Key, m.Value, want.Metadata[m.Key])
				}
			}
			var wantRecs []expectedRecord
			if err := json.Unmarshal(want.Records, &wantRecs); err != nil {
				t.Fatal(err)
			}
			if len(recs) != len(wantRecs) {
				t.Fatalf("%d records, want %d", len(recs), len(wantRecs))
			}
			for i, w := range wantRecs {
				if recs[i] != record(w) {
					t.Errorf("record %d = %q, want %q→%q", i, recs[i], w.Key, w.Value)
				}
			}
		})
	}
}

var aliceBob = []record{{"Alice", "Practice"}, {"Bob", "Hope"}}

// TestHadoopCodecs reads the files Hadoop wrote with each codec.
func TestHadoopCodecs(t *testing.T) {
	codecs := map[string]string{
		"zlib": DefaultCodec, "gzip": GzipCodec, "snappy": SnappyCodec,
		"zstd": ZStandardCodec, "bzip2": BZip2Codec,
	}
	tests := []struct {
		file  string
		comp  Compression
		codec string
	}{
		{"uncompressed.sequencefile", None, ""},
		{"uncompressed_written.sequencefile", None, ""},
	}
	for _, mode := range []struct {
		name string
		comp Compression
	}{{"record", RecordCompressed}, {"block", BlockCompressed}} {
		for short, class := range codecs {
			tests = append(tests, struct {
				file  string
				comp  Compression
				codec string
			}{mode.name + "_compressed_" + short + ".sequencefile", mode.comp, class})
		}
	}
	entries, err := os.ReadDir(filepath.Join(testdataDir, "hadoop-codecs"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(tests) {
		t.Fatalf("hadoop-codecs holds %d files, the test covers %d", len(entries), len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			h, recs, err := readAll(t, readFile(t, "hadoop-codecs/"+tt.file), ReaderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if h.Version != 6 || h.KeyClass != BytesWritable || h.ValueClass != BytesWritable ||
				h.Compression != tt.comp || h.Codec != tt.codec || len(h.Metadata) != 0 {
				t.Errorf("header %+v", h)
			}
			if !equalRecords(recs, aliceBob) {
				t.Errorf("records %q, want %q", recs, aliceBob)
			}
		})
	}
}

func equalRecords(a, b []record) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestInvalidFile(t *testing.T) {
	for _, path := range []string{
		"sequins/test_databases/unhealthy/baby-names-bad/1/part-00000",
		"sequins/test_databases/partially_healthy/baby-names-bad/1/part-00000",
	} {
		t.Run(path, func(t *testing.T) {
			_, err := NewReader(bytes.NewReader(readFile(t, path)), "part-00000")
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrNotSequenceFile) {
				t.Fatalf("err = %v, want *Error with ErrNotSequenceFile", err)
			}
			if got, want := err.Error(), "seqfile: part-00000: offset 0: not a SequenceFile"; got != want {
				t.Errorf("Error() = %q, want %q", got, want)
			}
		})
	}
}

func TestErrorMessage(t *testing.T) {
	tests := []struct {
		name string
		err  *Error
		want string
	}{
		{"sentinel", &Error{File: "part-00003", Offset: 1234, Msg: "bad sync marker", Err: ErrCorrupt},
			"seqfile: part-00003: offset 1234: bad sync marker"},
		{"cause", &Error{File: "f", Offset: 7, Msg: "truncated record", Err: io.ErrUnexpectedEOF},
			"seqfile: f: offset 7: truncated record: unexpected EOF"},
		{"no file", &Error{Offset: 0, Msg: "empty file"}, "seqfile: offset 0: empty file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
			if !errors.Is(tt.err, tt.err.Err) && tt.err.Err != nil {
				t.Errorf("errors.Is(err, %v) = false", tt.err.Err)
			}
		})
	}
}

// TestBufferedInput checks that a *bufio.Reader is used as it is, even one
// smaller than the structures read.
func TestBufferedInput(t *testing.T) {
	data := writeFile(t, WriterOptions{Compression: BlockCompressed, Codec: SnappyCodec, BlockSize: 100}, genRecords(200, 10, 50))
	want := genRecords(200, 10, 50)
	for _, size := range []int{16, 64, 4096} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			br := bufio.NewReaderSize(bytes.NewReader(data), size)
			r, err := NewReader(br, "x")
			if err != nil {
				t.Fatal(err)
			}
			if r.br != br {
				t.Fatal("the *bufio.Reader was wrapped again")
			}
			var got []record
			for r.Next() {
				got = append(got, record{string(r.Key()), string(r.Value())})
			}
			if r.Err() != nil || !equalRecords(got, want) {
				t.Fatalf("err %v, %d records", r.Err(), len(got))
			}
		})
	}
}

// TestLyingLengthMemory checks that a huge length in a truncated file does
// not make the reader allocate that much.
func TestLyingLengthMemory(t *testing.T) {
	data := writeFile(t, WriterOptions{}, []record{{"k", "v"}})
	hdrLen := len(data) - (8 + 5 + 5)
	evil := append([]byte(nil), data[:hdrLen]...)
	evil = append(evil, 0x0f, 0xff, 0xff, 0x00, 0, 0, 0, 4) // 268 MB record
	evil = append(evil, make([]byte, 1000)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _, err := readAll(t, evil, ReaderOptions{MaxSize: 1 << 30})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v, want io.ErrUnexpectedEOF", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20 {
		t.Errorf("allocated %d bytes for a 1 KB file", got)
	}
}
