package parquetin

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
	"github.com/pierrec/lz4/v4"
)

// MaxPageSize bounds every page's size, compressed and not: a file that
// declares a larger one is refused before anything is allocated for it.
const MaxPageSize = 256 << 20

// checkChunk walks the page headers of a column chunk before the library
// reads it, and refuses pages larger than maxPage (Options.MaxPage) or
// whose compressed data would not decompress to the size the header
// declares: the library
// allocates what headers claim and, for LZ4_RAW, doubles its buffer for
// as long as the data does not decode. Snappy pages are checked by their
// declared length; LZ4_RAW, GZIP and ZSTD pages are decompressed here,
// bounded.
func checkChunk(r io.ReaderAt, md *format.ColumnMetaData, start, maxPage int64) error {
	codec := md.Codec
	verify := codec == format.Lz4Raw || codec == format.Gzip || codec == format.Zstd
	cr := &countReader{r: io.NewSectionReader(r, start, md.TotalCompressedSize)}
	br := bufio.NewReaderSize(cr, 64<<10)
	var proto thrift.CompactProtocol
	dec := thrift.NewDecoder(proto.NewReader(br))
	var page, out []byte
	for pos := int64(0); pos < md.TotalCompressedSize; pos = cr.n - int64(br.Buffered()) {
		var h format.PageHeader
		if err := dec.Decode(&h); err != nil {
			return fmt.Errorf("page header at offset %d: %w", start+pos, err)
		}
		c, u := int64(h.CompressedPageSize), int64(h.UncompressedPageSize)
		if c < 0 || u < 0 || c > maxPage || u > maxPage {
			why := ""
			if maxPage < MaxPageSize {
				why = " (the reader's share of the memory budget)"
			}
			return fmt.Errorf("page at offset %d: %d bytes compressed, %d uncompressed: at most %d%s", start+pos, c, u, maxPage, why)
		}
		levels, compressed := int64(0), codec != format.Uncompressed
		if v2 := h.DataPageHeaderV2; v2.Valid {
			levels = int64(v2.V.RepetitionLevelsByteLength) + int64(v2.V.DefinitionLevelsByteLength)
			if v2.V.IsCompressed.Valid && !v2.V.IsCompressed.V {
				compressed = false
			}
			if levels < 0 || levels > c || levels > u {
				return fmt.Errorf("page at offset %d: %d bytes of levels in a page of %d", start+pos, levels, c)
			}
		}
		if !compressed || (!verify && codec != format.Snappy) || c == levels {
			if _, err := br.Discard(int(c)); err != nil {
				return fmt.Errorf("page at offset %d: %w", start+pos, err)
			}
			continue
		}
		if int64(cap(page)) < c {
			page = make([]byte, c)
		}
		page = page[:c]
		if _, err := io.ReadFull(br, page); err != nil {
			return fmt.Errorf("page at offset %d: %w", start+pos, err)
		}
		want := u - levels
		data := page[levels:]
		var err error
		switch codec {
		case format.Snappy:
			var n int
			if n, err = snappy.DecodedLen(data); err == nil && int64(n) != want {
				err = fmt.Errorf("snappy data of %d bytes, the header says %d", n, want)
			}
		case format.Lz4Raw:
			if int64(cap(out)) < want {
				out = make([]byte, want)
			}
			var n int
			if n, err = lz4.UncompressBlock(data, out[:want]); err == nil && int64(n) != want {
				err = fmt.Errorf("lz4 data of %d bytes, the header says %d", n, want)
			}
			if err == nil && 3*int64(len(data)) > libraryBufferCap(want) {
				// parquet-go v0.32.0 decodes such a page into a buffer of
				// its own, drops it and reads the page buffer, unfilled.
				err = fmt.Errorf("page of %d bytes compressed to %d, which the Parquet library misreads: write the file with another codec (snappy, zstd)", want, len(data))
			}
		case format.Gzip:
			var zr *gzip.Reader
			if zr, err = gzip.NewReader(bytes.NewReader(data)); err == nil {
				err = bounded(zr, want)
			}
		case format.Zstd:
			var zr *zstd.Decoder
			if zr, err = zstd.NewReader(bytes.NewReader(data), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(MaxPageSize), zstd.WithDecoderMaxWindow(MaxPageSize)); err == nil {
				err = bounded(zr, want)
				zr.Close()
			}
		}
		if err != nil {
			return fmt.Errorf("page at offset %d: %v: %w", start+pos, codec, err)
		}
	}
	return nil
}

// libraryBufferCap is the capacity of the buffer parquet-go v0.32.0 takes
// from its pool for a page of n bytes (internal/memory: buckets of 4 KiB
// doubling up to 256 KiB, then growing by half, 32 of them). Its LZ4_RAW
// decoder writes into that buffer only when it holds three times the
// compressed bytes.
func libraryBufferCap(n int64) int64 {
	size := int64(4096)
	for range 32 {
		if n <= size {
			return size
		}
		if size < 262144 {
			size *= 2
		} else {
			size += size / 2
		}
	}
	return n
}

// bounded reads r to its end and fails unless it gives exactly want bytes.
func bounded(r io.Reader, want int64) error {
	n, err := io.Copy(io.Discard, io.LimitReader(r, want+1))
	if err == nil && n != want {
		err = fmt.Errorf("decompresses to %d bytes or more, the header says %d", n, want)
	}
	return err
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
