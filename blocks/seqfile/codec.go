package seqfile

import (
	"bytes"
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

	src   bytes.Reader
	zlib  io.ReadCloser // implements zlib.Resetter once created
	gzip  *gzip.Reader
	zstd  *zstd.Decoder
	bzip2 *dsbzip2.Reader
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
	return readAllLimit(dst, d.bzip2, d.limit)
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
		return readAllLimit(dst, d.gzip, d.limit)
	case codecBzip2:
		return d.decompressBzip2(dst, src)
	case codecSnappy:
		return decodeHadoopSnappy(dst[:0], src, d.limit)
	case codecZstd:
		if d.zstd == nil {
			zd, err := zstd.NewReader(nil,
				zstd.WithDecoderConcurrency(1),
				zstd.WithDecoderMaxMemory(uint64(d.limit)),
				zstd.WithDecoderMaxWindow(uint64(max(d.limit, zstdMinWindow))),
			)
			if err != nil {
				return dst[:0], err
			}
			d.zstd = zd
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
