package seqfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// robustFiles returns real and written files, compressed and not, for the
// truncation and corruption tests.
func robustFiles(tb testing.TB) map[string][]byte {
	tb.Helper()
	files := map[string][]byte{}
	for _, path := range []string{
		"sequins/test_databases/healthy/baby-names/1/part-00001",
		"hadoop-codecs/record_compressed_gzip.sequencefile",
		"hadoop-codecs/record_compressed_zlib.sequencefile",
		"hadoop-codecs/block_compressed_snappy.sequencefile",
		"hadoop-codecs/block_compressed_zstd.sequencefile",
		"hadoop-codecs/block_compressed_bzip2.sequencefile",
	} {
		files[path] = readFile(tb, path)
	}
	recs := genRecords(60, 8, 70)
	sync := [16]byte{0: 0xa5, 15: 0x5a}
	files["writer/none"] = writeFile(tb, WriterOptions{Sync: sync}, recs)
	files["writer/record-zstd"] = writeFile(tb, WriterOptions{Sync: sync, Compression: RecordCompressed, Codec: ZStandardCodec}, recs[:10])
	files["writer/block-zlib-text"] = writeFile(tb, WriterOptions{Sync: sync, Compression: BlockCompressed,
		KeyClass: Text, ValueClass: Text, BlockSize: 1500}, recs)
	return files
}

// TestTruncation reads every prefix of each file: it must give some of the
// records, in order, then either a clean end (at a record boundary) or an
// *Error wrapping io.ErrUnexpectedEOF.
func TestTruncation(t *testing.T) {
	for name, data := range robustFiles(t) {
		t.Run(name, func(t *testing.T) {
			_, full, err := readAll(t, data, ReaderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for n := 0; n < len(data); n++ {
				_, recs, err := readAll(t, data[:n], ReaderOptions{BufferSize: 64})
				if len(recs) > len(full) || !equalRecords(recs, full[:len(recs)]) {
					t.Fatalf("prefix %d: records are not a prefix of the file's", n)
				}
				switch {
				case n == 0:
					if !errors.Is(err, ErrNotSequenceFile) {
						t.Fatalf("empty input: err = %v", err)
					}
				case err == nil:
					if len(recs) == len(full) {
						t.Fatalf("prefix %d of %d read all records cleanly", n, len(data))
					}
				case !errors.Is(err, io.ErrUnexpectedEOF):
					t.Fatalf("prefix %d: err = %v, want io.ErrUnexpectedEOF", n, err)
				}
			}
		})
	}
}

// TestBitFlips flips bits all over each file: reading must end cleanly or
// with an *Error, never panic. readAll checks the error type.
func TestBitFlips(t *testing.T) {
	for name, data := range robustFiles(t) {
		t.Run(name, func(t *testing.T) {
			buf := make([]byte, len(data))
			for i := range data {
				bits := []int{i % 8}
				if len(data) < 300 {
					bits = []int{0, 1, 2, 3, 4, 5, 6, 7}
				}
				for _, bit := range bits {
					copy(buf, data)
					buf[i] ^= 1 << bit
					readAll(t, buf, ReaderOptions{MaxSize: 1 << 20, BufferSize: 4096})
				}
			}
		})
	}
}

// fileBuilder assembles files byte by byte for the hostile-input tests.
type fileBuilder struct{ b []byte }

func (f *fileBuilder) raw(p ...byte) *fileBuilder { f.b = append(f.b, p...); return f }
func (f *fileBuilder) text(s string) *fileBuilder { f.b = appendText(f.b, s); return f }
func (f *fileBuilder) vint(v int64) *fileBuilder  { f.b = appendVLong(f.b, v); return f }
func (f *fileBuilder) int32(v int32) *fileBuilder {
	f.b = binary.BigEndian.AppendUint32(f.b, uint32(v))
	return f
}
func (f *fileBuilder) bytes(p []byte) *fileBuilder  { f.b = append(f.b, p...); return f }
func (f *fileBuilder) sync(s [16]byte) *fileBuilder { return f.int32(-1).bytes(s[:]) }

var testSync = [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

// header starts a v6 file with the given classes, flags and codec.
func header(key, value string, compressed, block bool, codec string) *fileBuilder {
	f := (&fileBuilder{}).raw('S', 'E', 'Q', 6).text(key).text(value).raw(b2i(compressed), b2i(block))
	if compressed {
		f.text(codec)
	}
	return f.int32(0).bytes(testSync[:])
}

func b2i(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// snappyBlock builds a block-compressed (snappy) block from raw buffers.
func (f *fileBuilder) snappyBlock(count int64, bufs ...[]byte) *fileBuilder {
	f.sync(testSync).vint(count)
	for _, b := range bufs {
		c := appendHadoopSnappy(nil, b)
		f.vint(int64(len(c))).bytes(c)
	}
	return f
}

func vints(vs ...int64) []byte {
	var b []byte
	for _, v := range vs {
		b = appendVLong(b, v)
	}
	return b
}

// bw serializes BytesWritables.
func bw(ps ...string) []byte {
	var b []byte
	for _, p := range ps {
		b = appendWrapped(b, wrapBytes, []byte(p))
	}
	return b
}

func TestHostileInput(t *testing.T) {
	const bwc = BytesWritable
	okRecord := func(f *fileBuilder) *fileBuilder { return f.int32(10).int32(5).bytes(bw("k")).bytes(bw("v")) }
	zeros := make([]byte, 2<<20)
	bomb := func(codec string, c Compression) []byte {
		return writeFile(t, WriterOptions{Compression: c, Codec: codec}, []record{{"k", string(zeros)}})
	}
	tests := []struct {
		name    string
		data    []byte
		maxSize int
		records int    // records read before the error
		want    error  // errors.Is target
		msg     string // substring of Error()
		offset  int64  // -1: not checked
	}{
		{"version 4", []byte("SEQ\x04"), 0, 0, ErrUnsupportedVersion, "unsupported version 4", 3},
		{"version 7", []byte("SEQ\x07"), 0, 0, ErrUnsupportedVersion, "unsupported version 7", 3},
		{"bad magic", []byte("SQLite format 3\x00"), 0, 0, ErrNotSequenceFile, "not a SequenceFile", 0},
		{"magic then bad version", []byte("SEQUENCE"), 0, 0, ErrUnsupportedVersion, "unsupported version 85", 3},
		{"lzo codec", header(bwc, bwc, true, false, "com.hadoop.compression.lzo.LzoCodec").b, 0, 0,
			ErrUnsupportedCodec, `unsupported codec "com.hadoop.compression.lzo.LzoCodec"`, -1},
		{"lz4 codec", header(bwc, bwc, true, true, Lz4Codec).b, 0, 0, ErrUnsupportedCodec, Lz4Codec, -1},
		{"block without compression", header(bwc, bwc, false, true, "").b, 0, 0, ErrCorrupt, "block compression flag", -1},
		{"negative metadata count", (&fileBuilder{}).raw('S', 'E', 'Q', 6).text(bwc).text(bwc).raw(0, 0).int32(-1).b, 0, 0,
			ErrCorrupt, "bad metadata count -1", -1},
		{"huge class name", (&fileBuilder{}).raw('S', 'E', 'Q', 6).vint(1 << 30).b, 1 << 20, 0, ErrTooLarge, "key class length", 4},
		{"negative class name length", (&fileBuilder{}).raw('S', 'E', 'Q', 6).vint(-5).b, 0, 0, ErrCorrupt, "bad key class length -5", 4},
		{"huge record", okRecord(header(bwc, bwc, false, false, "")).int32(1 << 30).int32(0).b, 1 << 20, 1,
			ErrTooLarge, "record length 1073741824 over limit", -1},
		{"negative record length", header(bwc, bwc, false, false, "").int32(-2).int32(0).b, 0, 0, ErrCorrupt, "bad record length -2", -1},
		{"key longer than record", header(bwc, bwc, false, false, "").int32(4).int32(5).bytes(make([]byte, 9)).b, 0, 0,
			ErrCorrupt, "key length 5", -1},
		{"bad sync marker", okRecord(header(bwc, bwc, false, false, "")).sync([16]byte{}).b, 0, 1,
			ErrCorrupt, "bad sync marker", int64(len(okRecord(header(bwc, bwc, false, false, "")).b))},
		{"BytesWritable length mismatch", header(bwc, bwc, false, false, "").int32(10).int32(5).bytes(bw("k")).int32(2).raw('v').b, 0, 0,
			ErrCorrupt, "bad org.apache.hadoop.io.BytesWritable value", -1},
		{"short BytesWritable", header(bwc, bwc, false, false, "").int32(3).int32(3).raw(0, 0, 0).b, 0, 0,
			ErrCorrupt, "bad org.apache.hadoop.io.BytesWritable key", -1},
		{"Text length mismatch", header(Text, Text, false, false, "").int32(4).int32(2).raw(1, 'k', 5, 'v').b, 0, 0,
			ErrCorrupt, "bad org.apache.hadoop.io.Text value", -1},
		{"block: bad sync", header(bwc, bwc, true, true, SnappyCodec).sync([16]byte{1}).b, 0, 0, ErrCorrupt, "bad sync marker", -1},
		{"block: missing escape", header(bwc, bwc, true, true, SnappyCodec).int32(5).bytes(testSync[:]).b, 0, 0,
			ErrCorrupt, "missing sync escape", -1},
		{"block: records left in buffers", header(bwc, bwc, true, true, SnappyCodec).
			snappyBlock(1, vints(5, 5), bw("a", "b"), vints(5, 5), bw("c", "d")).b, 0, 1, ErrCorrupt, "left over", -1},
		{"block: count beyond buffers", header(bwc, bwc, true, true, SnappyCodec).
			snappyBlock(3, vints(5, 5), bw("a", "b"), vints(5, 5, 5), bw("c", "d", "e")).b, 0, 0, ErrCorrupt, "exceeds its lengths buffers", -1},
		{"block: key length beyond keys", header(bwc, bwc, true, true, SnappyCodec).
			snappyBlock(2, vints(5, 6), bw("a", "b"), vints(5, 5), bw("c", "d")).b, 0, 1, ErrCorrupt, "bad length 6 for keys", -1},
		{"block: negative count", header(bwc, bwc, true, true, SnappyCodec).sync(testSync).vint(-1).b, 0, 0,
			ErrCorrupt, "bad block record count -1", -1},
		{"block: huge buffer", header(bwc, bwc, true, true, SnappyCodec).sync(testSync).vint(1).vint(1 << 30).b, 1 << 20, 0,
			ErrTooLarge, "block key lengths length 1073741824 over limit", -1},
		{"block: snappy length lies", header(bwc, bwc, true, true, SnappyCodec).sync(testSync).vint(1).
			vint(12).int32(1<<19).int32(4).raw(0, 0, 0, 0).b, 0, 0, nil, "decompress block key lengths", -1},
	}
	for _, codec := range writerCodecs {
		for _, c := range []Compression{RecordCompressed, BlockCompressed} {
			tests = append(tests, struct {
				name    string
				data    []byte
				maxSize int
				records int
				want    error
				msg     string
				offset  int64
			}{fmt.Sprintf("bomb %v %s", c, codec), bomb(codec, c), 1 << 20, 0, ErrTooLarge, "decompress", -1})
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, recs, err := readAll(t, tt.data, ReaderOptions{MaxSize: tt.maxSize})
			if err == nil {
				t.Fatalf("no error; %d records", len(recs))
			}
			if len(recs) != tt.records {
				t.Errorf("%d records before the error, want %d", len(recs), tt.records)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("err = %q, want it to contain %q", err, tt.msg)
			}
			var e *Error
			errors.As(err, &e)
			if e.File != "test" {
				t.Errorf("File = %q", e.File)
			}
			if tt.offset >= 0 && e.Offset != tt.offset {
				t.Errorf("Offset = %d, want %d", e.Offset, tt.offset)
			}
		})
	}
}

// TestTrailingSync accepts a file that ends right after a sync marker, as
// Hadoop's Writer.sync() can leave it.
func TestTrailingSync(t *testing.T) {
	f := header(BytesWritable, BytesWritable, false, false, "").int32(10).int32(5).bytes(bw("k")).bytes(bw("v")).sync(testSync)
	_, recs, err := readAll(t, f.b, ReaderOptions{})
	if err != nil || len(recs) != 1 {
		t.Fatalf("err %v, %d records", err, len(recs))
	}
}

// TestVersion5 reads a version 5 header, which has no metadata.
func TestVersion5(t *testing.T) {
	f := (&fileBuilder{}).raw('S', 'E', 'Q', 5).text(Text).text(Text).raw(0, 0).bytes(testSync[:]).
		int32(4).int32(2).raw(1, 'k', 1, 'v')
	h, recs, err := readAll(t, f.b, ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h.Version != 5 || h.Sync != testSync || len(recs) != 1 || recs[0] != (record{"k", "v"}) {
		t.Errorf("header %+v, records %q", h, recs)
	}
}

// TestRawFields checks RawKey/RawValue against Key/Value for each class.
func TestRawFields(t *testing.T) {
	tests := []struct {
		class      string
		raw, value string
	}{
		{BytesWritable, "\x00\x00\x00\x03abc", "abc"},
		{Text, "\x03abc", "abc"},
		{"org.apache.hadoop.io.IntWritable", "\x00\x00\x00\x2a", "\x00\x00\x00\x2a"},
	}
	for _, tt := range tests {
		t.Run(tt.class, func(t *testing.T) {
			n := int32(len(tt.raw))
			f := header(tt.class, tt.class, false, false, "").int32(2 * n).int32(n).raw([]byte(tt.raw)...).raw([]byte(tt.raw)...)
			r, err := NewReader(bytes.NewReader(f.b), "raw")
			if err != nil {
				t.Fatal(err)
			}
			if !r.Next() {
				t.Fatal(r.Err())
			}
			if string(r.RawKey()) != tt.raw || string(r.RawValue()) != tt.raw || string(r.Key()) != tt.value || string(r.Value()) != tt.value {
				t.Errorf("raw %q/%q, unwrapped %q/%q", r.RawKey(), r.RawValue(), r.Key(), r.Value())
			}
			if r.Next() || r.Err() != nil || r.Key() != nil {
				t.Errorf("after the last record: Next true, err %v or key %q", r.Err(), r.Key())
			}
		})
	}
}

// errReader returns data, then err.
type errReader struct {
	data []byte
	err  error
}

func (r *errReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

// TestReadError wraps an error of the underlying reader in an *Error.
func TestReadError(t *testing.T) {
	data := writeFile(t, WriterOptions{}, genRecords(100, 10, 10))
	cause := errors.New("connection reset")
	for _, n := range []int{0, 50, len(data) / 2, len(data)} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			r, err := NewReader(&errReader{data: data[:n], err: cause}, "net")
			if err == nil {
				for r.Next() {
				}
				err = r.Err()
			}
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, cause) {
				t.Fatalf("err = %v, want an *Error wrapping the cause", err)
			}
		})
	}
}

func TestVLong(t *testing.T) {
	values := []int64{0, 1, -1, 127, 128, -112, -113, 255, 256, -256, -257, 1 << 31, -(1 << 31), 1<<63 - 1, -1 << 63}
	for _, v := range values {
		b := appendVLong(nil, v)
		got, n := decodeVLong(b)
		if got != v || n != len(b) || vintSize(b[0]) != len(b) || vlongLen(v) != len(b) {
			t.Errorf("%d: encoded %x, decoded %d in %d bytes", v, b, got, n)
		}
		if _, n := decodeVLong(b[:len(b)-1]); n != 0 {
			t.Errorf("%d: decoded a truncated encoding", v)
		}
	}
	// Hadoop's encodings, from WritableUtils.
	known := map[int64]string{0: "00", 127: "7f", -112: "90", 128: "8f80", -113: "8770", 300: "8e012c"}
	for v, want := range known {
		if got := fmt.Sprintf("%x", appendVLong(nil, v)); got != want {
			t.Errorf("%d encodes as %s, want %s", v, got, want)
		}
	}
}
