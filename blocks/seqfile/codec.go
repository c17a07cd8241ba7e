package seqfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	dsbzip2 "github.com/dsnet/compress/bzip2"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// Java class names of Hadoop's compression codecs.
const (
	// DefaultCodec is zlib (RFC 1950), Hadoop's default and the most
	// common codec in the wild.
	DefaultCodec = "org.apache.hadoop.io.compress.DefaultCodec"
	// DeflateCodec is a subclass of DefaultCodec with the same format. The
	// reader accepts it; the writer does not write it.
	DeflateCodec   = "org.apache.hadoop.io.compress.DeflateCodec"
	GzipCodec      = "org.apache.hadoop.io.compress.GzipCodec"
	SnappyCodec    = "org.apache.hadoop.io.compress.SnappyCodec"
	ZStandardCodec = "org.apache.hadoop.io.compress.ZStandardCodec"
	BZip2Codec     = "org.apache.hadoop.io.compress.BZip2Codec"
	// Lz4Codec is recognised but not supported: reading or writing it
	// fails with ErrUnsupportedCodec.
	Lz4Codec = "org.apache.hadoop.io.compress.Lz4Codec"
)

type codecKind int

// zstdMinWindow is the window size every zstd decoder should accept (RFC
// 8878 recommends 8 MB), even when MaxSize is smaller.
const zstdMinWindow = 8 << 20

const (
	codecZlib codecKind = iota + 1
	codecGzip
	codecSnappy
	codecZstd
	codecBzip2
)

// lookupCodec maps a codec class name to what this package implements.
func lookupCodec(class string) (codecKind, bool) {
	switch class {
	case DefaultCodec, DeflateCodec:
		return codecZlib, true
	case GzipCodec:
		return codecGzip, true
	case SnappyCodec:
		return codecSnappy, true
	case ZStandardCodec:
		return codecZstd, true
	case BZip2Codec:
		return codecBzip2, true
	}
	return 0, false
}

// decompressor decodes one compressed buffer (a record-compressed value, or
// one of a block's four buffers). It keeps its state between calls so that
// decoders are reused; it is not safe for concurrent use.
type decompressor struct {
	kind  codecKind
	limit int // the largest output accepted
	max   int // the largest limit ever set (the zstd decoder's bound)

	src   bytes.Reader
	zlib  io.ReadCloser // implements zlib.Resetter once created
	gzip  *gzip.Reader
	zstd  *zstd.Decoder
	zstdS *zstd.Decoder // streams, below limit (zstdStreamed)
	bzip2 *dsbzip2.Reader
}

// zstdStreamed decodes src as a stream, its output bounded by d.limit.
func (d *decompressor) zstdStreamed(dst, src []byte) ([]byte, error) {
	d.src.Reset(src)
	in := struct{ io.Reader }{&d.src} // no Len: the decoder would decode it whole at once
	if d.zstdS == nil {
		zd, err := zstd.NewReader(in, zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxWindow(uint64(max(d.max, zstdMinWindow))))
		if err != nil {
			return dst[:0], err
		}
		d.zstdS = zd
	} else if err := d.zstdS.Reset(in); err != nil {
		return dst[:0], err
	}
	out, err := readAllLimit(dst, d.zstdS, d.limit)
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		return dst[:0], ErrTooLarge
	}
	return out, err
}

// decompressBzip2 decodes with dsnet's bzip2 reader, which, unlike the
// standard library's, can be reset and so reuses its block buffers (about
// 4 MB at level 9) instead of allocating them for every buffer. That package
// signals errors internally with panics; in case one that it does not
// recover escapes on hostile input, it is turned into an error here.
func (d *decompressor) decompressBzip2(dst, src []byte) (out []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			d.bzip2 = nil // its state is unknown: start afresh next time
			out, err = dst[:0], fmt.Errorf("bzip2 decoder failed: %v", p)
		}
	}()
	d.src.Reset(src)
	if d.bzip2 == nil {
		zr, err := dsbzip2.NewReader(&d.src, nil)
		if err != nil {
			return dst[:0], err
		}
		d.bzip2 = zr
	} else if err := d.bzip2.Reset(&d.src); err != nil {
		return dst[:0], err
	}
	out, err = readAllLimit(dst, d.bzip2, d.limit)
	if err != nil {
		d.bzip2 = nil // stopped mid-stream, it does not Reset cleanly: start afresh
	}
	return out, err
}

// decompress decodes src into dst[:0], growing it as needed, and returns the
// result. Output longer than d.limit fails with ErrTooLarge.
func (d *decompressor) decompress(dst, src []byte) ([]byte, error) {
	switch d.kind {
	case codecZlib:
		d.src.Reset(src)
		if d.zlib == nil {
			zr, err := zlib.NewReader(&d.src)
			if err != nil {
				return dst[:0], err
			}
			d.zlib = zr
		} else if err := d.zlib.(zlib.Resetter).Reset(&d.src, nil); err != nil {
			return dst[:0], err
		}
		return readAllLimit(dst, d.zlib, d.limit)
	case codecGzip:
		d.src.Reset(src)
		if d.gzip == nil {
			zr, err := gzip.NewReader(&d.src)
			if err != nil {
				return dst[:0], err
			}
			d.gzip = zr
		} else if err := d.gzip.Reset(&d.src); err != nil {
			return dst[:0], err
		}
		// The trailer's ISIZE is the (last member's) size mod 2^32: room
		// for it at once spares the doubling steps and their garbage (a
		// value of 200 MiB took 200 + 128 MiB at its last step). A lying
		// ISIZE costs at most limit, as a lying stream does; one over limit
		// fails (a Reader's share: decoded again, in its gate).
		if len(src) >= 18 {
			n := int64(binary.LittleEndian.Uint32(src[len(src)-4:])) + 1
			if n > int64(d.limit)+1 {
				return dst[:0], ErrTooLarge // said at once: no buffer grown to learn it
			}
			if int64(cap(dst)) < n {
				dst = make([]byte, 0, n)
			}
		}
		return readAllLimit(dst, d.gzip, d.limit)
	case codecBzip2:
		return d.decompressBzip2(dst, src)
	case codecSnappy:
		return decodeHadoopSnappy(dst[:0], src, d.limit)
	case codecZstd:
		if d.zstd == nil {
			zd, err := zstd.NewReader(nil,
				zstd.WithDecoderConcurrency(1),
				zstd.WithDecoderMaxMemory(uint64(d.max)),
				zstd.WithDecoderMaxWindow(uint64(max(d.max, zstdMinWindow))),
			)
			if err != nil {
				return dst[:0], err
			}
			d.zstd = zd
		}
		if d.limit < d.max {
			// Below the bound the decoder was made with (a Reader's share):
			// a frame that says its size is decoded at once if that fits;
			// one that does not (Hadoop's streams) is streamed by a decoder
			// of its own, so that the output grows only up to limit.
			var fh zstd.Header
			if fh.Decode(src) == nil && fh.HasFCS {
				if fh.FrameContentSize > uint64(d.limit) {
					return dst[:0], ErrTooLarge
				}
			} else {
				return d.zstdStreamed(dst, src)
			}
		}
		out, err := d.zstd.DecodeAll(src, dst[:0])
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
			return dst[:0], ErrTooLarge
		}
		if err != nil {
			return dst[:0], err
		}
		if len(out) > d.limit {
			return dst[:0], ErrTooLarge
		}
		return out, nil
	}
	return dst[:0], ErrUnsupportedCodec
}

// readAllLimit reads r to its end into dst[:0]. It grows dst only as data
// arrives, so a decompression bomb costs at most limit+1 bytes.
func readAllLimit(dst []byte, r io.Reader, limit int) ([]byte, error) {
	dst = dst[:0]
	for {
		if len(dst) == cap(dst) {
			if len(dst) > limit {
				return dst[:0], ErrTooLarge
			}
			n := min(max(2*cap(dst), 4096), limit+1)
			grown := make([]byte, len(dst), n)
			copy(grown, dst)
			dst = grown
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if len(dst) > limit {
			return dst[:0], ErrTooLarge
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst[:0], err
		}
	}
}

// compressor encodes buffers for a Writer, reusing its encoder.
type compressor struct {
	kind  codecKind
	out   appendWriter
	zlib  *zlib.Writer
	gzip  *gzip.Writer
	zstd  *zstd.Encoder
	bzip2 *dsbzip2.Writer
}

func newCompressor(kind codecKind) (*compressor, error) {
	c := &compressor{kind: kind}
	var err error
	switch kind {
	case codecZlib:
		c.zlib = zlib.NewWriter(&c.out)
	case codecGzip:
		c.gzip = gzip.NewWriter(&c.out)
	case codecZstd:
		c.zstd, err = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true))
	case codecBzip2:
		c.bzip2, err = dsbzip2.NewWriter(&c.out, nil)
	case codecSnappy:
	default:
		err = ErrUnsupportedCodec
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// compress appends the compressed form of src to dst.
func (c *compressor) compress(dst, src []byte) ([]byte, error) {
	switch c.kind {
	case codecSnappy:
		return appendHadoopSnappy(dst, src), nil
	case codecZstd:
		return c.zstd.EncodeAll(src, dst), nil
	}
	c.out.b = dst
	var w io.WriteCloser
	switch c.kind {
	case codecZlib:
		c.zlib.Reset(&c.out)
		w = c.zlib
	case codecGzip:
		c.gzip.Reset(&c.out)
		w = c.gzip
	case codecBzip2:
		if err := c.bzip2.Reset(&c.out); err != nil {
			return dst, err
		}
		w = c.bzip2
	}
	if _, err := w.Write(src); err != nil {
		return dst, err
	}
	if err := w.Close(); err != nil {
		return dst, err
	}
	out := c.out.b
	c.out.b = nil
	return out, nil
}

func (c *compressor) close() error {
	if c.zstd != nil {
		return c.zstd.Close()
	}
	return nil
}

// appendWriter is an io.Writer that appends to a slice.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}
