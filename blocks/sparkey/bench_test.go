package sparkey

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/klauspost/compress/snappy"
)

// snappyLog returns a snappy-compressed log of n puts of 16-byte keys and
// 100-byte values, in blocks of 4 KiB.
func snappyLog(n int) []byte {
	var data, block []byte
	var hdr [logHeaderSize]byte
	flush := func() {
		comp := snappy.Encode(nil, block)
		data = binary.AppendUvarint(data, uint64(len(comp)))
		data = append(data, comp...)
		block = block[:0]
	}
	val := bytes.Repeat([]byte("0123456789"), 10)
	for i := range n {
		e := binary.AppendUvarint(nil, 17)
		e = binary.AppendUvarint(e, uint64(len(val)))
		e = append(append(e, fmt.Sprintf("key-%012d", i)...), val...)
		if len(block)+len(e) > 4096 {
			flush()
		}
		block = append(block, e...)
	}
	flush()
	le := binary.LittleEndian
	le.PutUint32(hdr[0:], LogMagic)
	le.PutUint32(hdr[4:], 1)
	le.PutUint64(hdr[16:], uint64(n))
	le.PutUint64(hdr[32:], uint64(logHeaderSize+len(data)))
	le.PutUint64(hdr[40:], 16)
	le.PutUint64(hdr[48:], uint64(len(val)))
	le.PutUint32(hdr[64:], CompressionSnappy)
	le.PutUint32(hdr[68:], 4096)
	return append(hdr[:], data...)
}

// BenchmarkReader reads a snappy log of 100k puts.
func BenchmarkReader(b *testing.B) {
	const n = 100_000
	log := snappyLog(n)
	b.SetBytes(int64(len(log)))
	for b.Loop() {
		r, err := NewReader(bytes.NewReader(log), "bench.spl")
		if err != nil {
			b.Fatal(err)
		}
		got := 0
		for r.Next() {
			got++
		}
		if err := r.Err(); err != nil || got != n {
			b.Fatalf("%d puts, %v", got, err)
		}
		r.Close()
	}
}
