package seqfile

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// WriterOptions configures a Writer. The zero value writes an uncompressed
// version 6 file with BytesWritable keys and values, no metadata and a random
// sync marker.
type WriterOptions struct {
	// KeyClass and ValueClass are the Java class names written to the
	// header. Default (empty): BytesWritable. Append wraps BytesWritable and
	// Text; any other class is written as given, so the caller passes the
	// serialized bytes.
	KeyClass, ValueClass string
	// Compression is the compression type. Default None.
	Compression Compression
	// Codec is the codec class name, used only when Compression is not None:
	// DefaultCodec (the default when empty), GzipCodec, SnappyCodec,
	// ZStandardCodec or BZip2Codec.
	Codec string
	// Metadata is written to the header in order. Default none.
	Metadata []Metadata
	// Sync is the sync marker. Default (all zero bytes): 16 random bytes.
	Sync [16]byte
	// BlockSize is, for BlockCompressed, the total serialized size of a
	// block's keys and values at which the block is written out. Default
	// 1,000,000, Hadoop's io.seqfile.compress.blocksize.
	BlockSize int
}

const (
	// syncInterval is how many bytes of records an uncompressed or
	// record-compressed file holds between sync markers (Hadoop's
	// SYNC_INTERVAL of older releases: 100 sync sizes).
	syncInterval = 100 * (4 + syncSize)

	defaultBlockSize  = 1_000_000
	writerBufferSize  = 256 << 10
	maxSerializedSize = math.MaxInt32
)

var errWriterClosed = errors.New("seqfile: writer is closed")

// Writer writes a version 6 SequenceFile. It is not safe for concurrent use.
// Errors are sticky: after one, every call returns it.
type Writer struct {
	bw          *bufio.Writer
	hdr         Header
	keyKind     wrapKind
	valKind     wrapKind
	comp        *compressor // nil when uncompressed
	blockSize   int
	pos         int64  // bytes written so far
	lastSync    int64  // pos after the last sync marker
	scratch     []byte // the header; a serialized value before compression
	cbuf        []byte // compressor output
	nrec        int    // records buffered in the current block
	klens, keys []byte // the current block's buffers, uncompressed
	vlens, vals []byte
	err         error // sticky
	closed      bool
	syncBytes   [4 + syncSize]byte   // the escape and the sync marker
	hdrBuf      [8 + maxVIntLen]byte // record lengths and a length prefix
}

// NewWriter writes the file header to w and returns a Writer. Nothing reaches
// w before the Writer's internal buffer fills or Close is called.
func NewWriter(w io.Writer, opts WriterOptions) (*Writer, error) {
	h := Header{
		Version:     maxVersion,
		KeyClass:    opts.KeyClass,
		ValueClass:  opts.ValueClass,
		Compression: opts.Compression,
		Metadata:    opts.Metadata,
		Sync:        opts.Sync,
	}
	if h.KeyClass == "" {
		h.KeyClass = BytesWritable
	}
	if h.ValueClass == "" {
		h.ValueClass = BytesWritable
	}
	wr := &Writer{
		hdr:       h,
		keyKind:   kindOf(h.KeyClass),
		valKind:   kindOf(h.ValueClass),
		blockSize: opts.BlockSize,
	}
	switch opts.Compression {
	case None:
		if opts.Codec != "" {
			return nil, fmt.Errorf("seqfile: codec %s given without compression", opts.Codec)
		}
	case RecordCompressed, BlockCompressed:
		wr.hdr.Codec = opts.Codec
		if wr.hdr.Codec == "" {
			wr.hdr.Codec = DefaultCodec
		}
		kind, ok := lookupCodec(wr.hdr.Codec)
		if !ok || wr.hdr.Codec == DeflateCodec {
			return nil, fmt.Errorf("%w: %s", ErrUnsupportedCodec, wr.hdr.Codec)
		}
		c, err := newCompressor(kind)
		if err != nil {
			return nil, fmt.Errorf("seqfile: codec %s: %w", wr.hdr.Codec, err)
		}
		wr.comp = c
	default:
		return nil, fmt.Errorf("seqfile: invalid compression %v", opts.Compression)
	}
	if wr.blockSize < 0 {
		return nil, fmt.Errorf("seqfile: negative block size %d", wr.blockSize)
	}
	if wr.blockSize == 0 {
		wr.blockSize = defaultBlockSize
	}
	if wr.hdr.Sync == ([16]byte{}) {
		if _, err := rand.Read(wr.hdr.Sync[:]); err != nil {
			return nil, fmt.Errorf("seqfile: make sync marker: %w", err)
		}
	}
	binary.BigEndian.PutUint32(wr.syncBytes[:], math.MaxUint32) // -1
	copy(wr.syncBytes[4:], wr.hdr.Sync[:])

	wr.bw = bufio.NewWriterSize(w, writerBufferSize)
	wr.scratch = appendHeader(wr.scratch[:0], &wr.hdr)
	wr.write(wr.scratch)
	if wr.err != nil {
		return nil, wr.err
	}
	return wr, nil
}

// Header returns the header written. The caller must not modify it.
func (w *Writer) Header() *Header { return &w.hdr }

// Append writes one record. key and value are the payloads: Append adds the
// BytesWritable or Text length prefix that the header's classes call for.
// Append does not retain key or value.
func (w *Writer) Append(key, value []byte) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return errWriterClosed
	}
	if w.hdr.Compression == BlockCompressed {
		return w.appendBlock(key, value)
	}
	kl := wrappedLen(w.keyKind, len(key))
	vl := wrappedLen(w.valKind, len(value))
	if kl > maxSerializedSize || vl > maxSerializedSize {
		return fmt.Errorf("seqfile: record of %d+%d bytes is too large", len(key), len(value))
	}
	if w.pos >= w.lastSync+syncInterval {
		w.writeSync()
	}
	var compressed []byte
	if w.comp != nil {
		w.scratch = appendWrapped(w.scratch[:0], w.valKind, value)
		var err error
		if w.cbuf, err = w.comp.compress(w.cbuf[:0], w.scratch); err != nil {
			w.err = fmt.Errorf("seqfile: compress value: %w", err)
			return w.err
		}
		compressed = w.cbuf
		vl = len(compressed)
	}
	if kl+vl > maxSerializedSize {
		return fmt.Errorf("seqfile: record of %d+%d bytes is too large", len(key), len(value))
	}
	b := w.hdrBuf[:0]
	b = binary.BigEndian.AppendUint32(b, uint32(kl+vl))
	b = binary.BigEndian.AppendUint32(b, uint32(kl))
	b = appendPrefix(b, w.keyKind, len(key))
	w.write(b)
	w.write(key)
	if compressed != nil {
		w.write(compressed)
	} else {
		w.write(appendPrefix(w.hdrBuf[:0], w.valKind, len(value)))
		w.write(value)
	}
	return w.err
}

func (w *Writer) appendBlock(key, value []byte) error {
	kl := wrappedLen(w.keyKind, len(key))
	vl := wrappedLen(w.valKind, len(value))
	if int64(len(w.keys))+int64(kl) > maxSerializedSize || int64(len(w.vals))+int64(vl) > maxSerializedSize {
		if w.nrec > 0 {
			w.flushBlock()
		}
		if kl > maxSerializedSize || vl > maxSerializedSize {
			return fmt.Errorf("seqfile: record of %d+%d bytes is too large", len(key), len(value))
		}
	}
	w.klens = appendVLong(w.klens, int64(kl))
	w.keys = appendWrapped(w.keys, w.keyKind, key)
	w.vlens = appendVLong(w.vlens, int64(vl))
	w.vals = appendWrapped(w.vals, w.valKind, value)
	w.nrec++
	if len(w.keys)+len(w.vals) >= w.blockSize {
		w.flushBlock()
	}
	return w.err
}

// flushBlock writes the buffered records as one block: a sync marker, the
// record count, and the four compressed buffers.
func (w *Writer) flushBlock() {
	if w.err != nil || w.nrec == 0 {
		return
	}
	w.writeSync()
	w.write(appendVLong(w.hdrBuf[:0], int64(w.nrec)))
	for _, buf := range [...][]byte{w.klens, w.keys, w.vlens, w.vals} {
		var err error
		if w.cbuf, err = w.comp.compress(w.cbuf[:0], buf); err != nil {
			w.err = fmt.Errorf("seqfile: compress block: %w", err)
			return
		}
		if len(w.cbuf) > maxSerializedSize {
			w.err = fmt.Errorf("seqfile: compressed block buffer of %d bytes is too large", len(w.cbuf))
			return
		}
		w.write(appendVLong(w.hdrBuf[:0], int64(len(w.cbuf))))
		w.write(w.cbuf)
	}
	w.nrec = 0
	w.klens, w.keys, w.vlens, w.vals = w.klens[:0], w.keys[:0], w.vlens[:0], w.vals[:0]
}

func (w *Writer) writeSync() {
	w.write(w.syncBytes[:])
	w.lastSync = w.pos
}

func (w *Writer) write(b []byte) {
	if w.err != nil {
		return
	}
	n, err := w.bw.Write(b)
	w.pos += int64(n)
	if err != nil {
		w.err = fmt.Errorf("seqfile: write: %w", err)
	}
}

// Close writes any buffered block and flushes the Writer's buffer. It does
// not close the underlying io.Writer. Calling Close again returns the first
// call's result.
func (w *Writer) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	if w.hdr.Compression == BlockCompressed {
		w.flushBlock()
	}
	if w.err == nil {
		if err := w.bw.Flush(); err != nil {
			w.err = fmt.Errorf("seqfile: write: %w", err)
		}
	}
	if w.comp != nil {
		if err := w.comp.close(); err != nil && w.err == nil {
			w.err = fmt.Errorf("seqfile: close codec: %w", err)
		}
	}
	return w.err
}

// wrapKind says how a class's payload is wrapped in its serialized form.
type wrapKind uint8

const (
	wrapRaw wrapKind = iota
	wrapBytes
	wrapText
)

func kindOf(class string) wrapKind {
	switch class {
	case BytesWritable:
		return wrapBytes
	case Text:
		return wrapText
	}
	return wrapRaw
}

func vlongLen(v int64) int {
	if v >= -112 && v <= 127 {
		return 1
	}
	if v < 0 {
		v = ^v
	}
	n := 1
	for ; v != 0; v >>= 8 {
		n++
	}
	return n
}

func wrappedLen(k wrapKind, n int) int {
	switch k {
	case wrapBytes:
		return 4 + n
	case wrapText:
		return vlongLen(int64(n)) + n
	}
	return n
}

func appendPrefix(b []byte, k wrapKind, n int) []byte {
	switch k {
	case wrapBytes:
		return binary.BigEndian.AppendUint32(b, uint32(n))
	case wrapText:
		return appendVLong(b, int64(n))
	}
	return b
}

func appendWrapped(b []byte, k wrapKind, p []byte) []byte {
	return append(appendPrefix(b, k, len(p)), p...)
}
