package seqfile

import (
	"bytes"
	"fmt"
	"io"
	"testing"
)

// benchRecords returns n records with 16-byte keys and 100-byte values,
// values somewhat compressible like real data.
func benchRecords(n int) (keys, values [][]byte) {
	keys = make([][]byte, n)
	values = make([][]byte, n)
	words := []string{"alpha ", "beta ", "gamma ", "delta ", "epsilon ", "zeta ", "eta ", "theta "}
	state := uint64(88172645463325252)
	next := func() uint64 { // xorshift
		state ^= state << 13
		state ^= state >> 7
		state ^= state << 17
		return state
	}
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key-%012d", next()%1e12)
		v := make([]byte, 0, 100)
		for len(v) < 100 {
			v = append(v, words[next()%uint64(len(words))]...)
		}
		values[i] = v[:100]
	}
	return keys, values
}

func benchFile(b *testing.B, opts WriterOptions, n int) []byte {
	b.Helper()
	keys, values := benchRecords(n)
	var buf bytes.Buffer
	w, err := NewWriter(&buf, opts)
	if err != nil {
		b.Fatal(err)
	}
	for i := range keys {
		if err := w.Append(keys[i], values[i]); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

var benchModes = []struct {
	name string
	opts WriterOptions
}{
	{"none", WriterOptions{}},
	{"block-zstd", WriterOptions{Compression: BlockCompressed, Codec: ZStandardCodec}},
	{"block-snappy", WriterOptions{Compression: BlockCompressed, Codec: SnappyCodec}},
	{"block-zlib", WriterOptions{Compression: BlockCompressed, Codec: DefaultCodec}},
	{"record-snappy", WriterOptions{Compression: RecordCompressed, Codec: SnappyCodec}},
}

// BenchmarkRead reads files of 16-byte keys and 100-byte values. MB/s counts
// the file's bytes.
func BenchmarkRead(b *testing.B) {
	for _, mode := range benchModes {
		for _, n := range []int{1_000, 100_000, 1_000_000} {
			if n == 1_000_000 && mode.name != "none" && mode.name != "block-zstd" && mode.name != "block-snappy" {
				continue
			}
			b.Run(fmt.Sprintf("%s/%d", mode.name, n), func(b *testing.B) {
				data := benchFile(b, mode.opts, n)
				b.SetBytes(int64(len(data)))
				b.ReportAllocs()
				var records int64
				for b.Loop() {
					r, err := NewReader(bytes.NewReader(data), "bench")
					if err != nil {
						b.Fatal(err)
					}
					for r.Next() {
						_ = r.Key()
						_ = r.Value()
					}
					if r.Err() != nil || r.Records() != int64(n) {
						b.Fatalf("err %v, %d records", r.Err(), r.Records())
					}
					records += r.Records()
				}
				b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}

// BenchmarkWrite writes records of 16-byte keys and 100-byte values.
func BenchmarkWrite(b *testing.B) {
	const n = 100_000
	keys, values := benchRecords(n)
	for _, mode := range benchModes {
		b.Run(mode.name, func(b *testing.B) {
			size := len(benchFile(b, mode.opts, n))
			b.SetBytes(int64(size))
			b.ReportAllocs()
			var records int64
			for b.Loop() {
				w, err := NewWriter(io.Discard, mode.opts)
				if err != nil {
					b.Fatal(err)
				}
				for i := range keys {
					if err := w.Append(keys[i], values[i]); err != nil {
						b.Fatal(err)
					}
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
				records += n
			}
			b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
