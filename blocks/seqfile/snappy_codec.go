package seqfile

import (
	"encoding/binary"
	"errors"

	"github.com/klauspost/compress/snappy"
)

// Hadoop's SnappyCodec does not use the snappy framing format. Its
// BlockCompressorStream writes, for each run of at most snappyBlockSize
// input bytes, a big-endian uint32 of the run's length, then one or more
// chunks, each a big-endian uint32 compressed length and a raw snappy block,
// until the chunks decode to the run's length. A run length of 0 ends the
// stream.

// snappyBlockSize is Hadoop's io.compression.codec.snappy.buffersize default.
const snappyBlockSize = 256 << 10

// snappyMaxRatio bounds how much a snappy block can expand: the densest
// element, a 3-byte copy, yields 64 bytes. Claims above it are corrupt and
// are rejected before any allocation.
const snappyMaxRatio = 22

var errSnappyFraming = errors.New("bad Hadoop snappy framing")

// decodeHadoopSnappy appends the decoded stream src to dst.
func decodeHadoopSnappy(dst, src []byte, limit int) ([]byte, error) {
	for len(src) > 0 {
		if len(src) < 4 {
			return dst, errSnappyFraming
		}
		want := int64(binary.BigEndian.Uint32(src))
		src = src[4:]
		if want == 0 {
			break
		}
		if want > int64(limit-len(dst)) {
			return dst, ErrTooLarge
		}
		if want > int64(len(src))*snappyMaxRatio {
			return dst, errSnappyFraming
		}
		for got := int64(0); got < want; {
			if len(src) < 4 {
				return dst, errSnappyFraming
			}
			n := int64(binary.BigEndian.Uint32(src))
			src = src[4:]
			if n > int64(len(src)) {
				return dst, errSnappyFraming
			}
			chunk := src[:n]
			src = src[n:]
			dlen, err := snappy.DecodedLen(chunk)
			if err != nil {
				return dst, err
			}
			if int64(dlen) > want-got {
				return dst, errSnappyFraming
			}
			start := len(dst)
			dst = grow(dst, dlen)
			if _, err := snappy.Decode(dst[start:], chunk); err != nil {
				return dst[:start], err
			}
			got += int64(dlen)
		}
	}
	return dst, nil
}

// appendHadoopSnappy appends src encoded with Hadoop's snappy framing. An
// empty src is a zero run length, as Hadoop writes it.
func appendHadoopSnappy(dst, src []byte) []byte {
	if len(src) == 0 {
		return binary.BigEndian.AppendUint32(dst, 0)
	}
	for len(src) > 0 {
		n := min(len(src), snappyBlockSize)
		dst = binary.BigEndian.AppendUint32(dst, uint32(n))
		lenAt := len(dst)
		dst = binary.BigEndian.AppendUint32(dst, 0)
		start := len(dst)
		dst = grow(dst, snappy.MaxEncodedLen(n))
		enc := snappy.Encode(dst[start:], src[:n])
		dst = dst[:start+len(enc)]
		binary.BigEndian.PutUint32(dst[lenAt:], uint32(len(enc)))
		src = src[n:]
	}
	return dst
}

// grow extends b by n bytes, reallocating when its capacity is short. The
// new bytes are not zeroed.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), max(2*cap(b), len(b)+n))
		copy(nb, b)
		b = nb
	}
	return b[:len(b)+n]
}
