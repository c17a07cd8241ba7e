// Package sparkey reads Sparkey log files (spotify/sparkey, format 1.0),
// in pure Go, as sequins takes them for input: a log (.spl) of puts,
// uncompressed or in Snappy or Zstd blocks, read from start to end, and
// its hash index (.spi, framed-Snappy compressed as .spi.sz), of which only
// the header is read, to check that it belongs to the log.
package sparkey

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
)

// Magic numbers and sizes of Sparkey's headers.
const (
	LogMagic      = 0x49b39c95
	HashMagic     = 0x9a11318f
	logHeaderSize = 84
)

// Compression types of a log.
const (
	CompressionNone   = 0
	CompressionSnappy = 1
	CompressionZstd   = 2
)

// MaxBlockSize bounds a log's compression block size, MaxEntrySize a key
// or value: larger ones are refused before anything is allocated.
const (
	MaxBlockSize = 64 << 20
	MaxEntrySize = 1<<31 - 2
)

// ErrFormat is wrapped by every error about a file's content.
var ErrFormat = errors.New("sparkey: bad sparkey input")

// Error reports a file that cannot be read, naming the file, the entry
// (-1 before the first) and the reason. errors.Is(err, ErrFormat) is true.
type Error struct {
	File  string
	Entry int64
	Err   error
}

func (e *Error) Error() string {
	if e.Entry < 0 {
		return fmt.Sprintf("sparkey file %s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("sparkey file %s: entry %d: %v", e.File, e.Entry, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrFormat) true.
func (e *Error) Is(target error) bool { return target == ErrFormat }

// Header is a log's header.
type Header struct {
	FileID                 uint32
	Puts, Deletes          uint64
	DataEnd                uint64
	MaxKeyLen, MaxValueLen uint64
	Compression            uint32
	BlockSize              uint32
	MaxEntriesPerBlock     uint32
}

// Reader reads the puts of a log in order. It is not safe for concurrent
// use.
type Reader struct {
	name string
	hdr  Header
	src  *bufio.Reader
	left int64 // bytes of the log's data not yet read from src
	// Decompressed block being read (compressed logs).
	block []byte
	pos   int
	zstd  *zstd.Decoder
	raw   []byte

	entry  int64
	err    error
	k, v   []byte
	kb, vb []byte
}

// NewReader reads the log header from r (named name in errors).
func NewReader(r io.Reader, name string) (*Reader, error) {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 256<<10)
	}
	rd := &Reader{name: name, src: br}
	if err := rd.readHeader(); err != nil {
		rd.Close()
		return nil, &Error{File: name, Entry: -1, Err: err}
	}
	return rd, nil
}

// Header is the log's header.
func (r *Reader) Header() Header { return r.hdr }

func (r *Reader) readHeader() error {
	var b [logHeaderSize]byte
	if _, err := io.ReadFull(r.src, b[:]); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return errors.New("shorter than a log header")
		}
		return err
	}
	le := binary.LittleEndian
	if m := le.Uint32(b[0:]); m != LogMagic {
		return fmt.Errorf("not a sparkey log: magic %08x", m)
	}
	if major, minor := le.Uint32(b[4:]), le.Uint32(b[8:]); major != 1 || minor != 0 {
		return fmt.Errorf("log format %d.%d: want 1.0", major, minor)
	}
	h := Header{
		FileID: le.Uint32(b[12:]), Puts: le.Uint64(b[16:]), Deletes: le.Uint64(b[24:]), DataEnd: le.Uint64(b[32:]),
		MaxKeyLen: le.Uint64(b[40:]), MaxValueLen: le.Uint64(b[48:]),
		Compression: le.Uint32(b[64:]), BlockSize: le.Uint32(b[68:]), MaxEntriesPerBlock: le.Uint32(b[80:]),
	}
	switch {
	case h.DataEnd < logHeaderSize || h.DataEnd > 1<<62:
		return fmt.Errorf("data end %d", h.DataEnd)
	case h.Puts > h.DataEnd || h.Deletes > h.DataEnd:
		return fmt.Errorf("%d puts and %d deletes in %d bytes", h.Puts, h.Deletes, h.DataEnd)
	case h.Deletes > 0:
		return fmt.Errorf("log holds %d deletes: spangle reads logs of puts only", h.Deletes)
	case h.Compression > CompressionZstd:
		return fmt.Errorf("compression type %d", h.Compression)
	case h.Compression != CompressionNone && (h.BlockSize == 0 || h.BlockSize > MaxBlockSize):
		return fmt.Errorf("compression block size %d: want 1 to %d", h.BlockSize, MaxBlockSize)
	}
	r.hdr = h
	r.left = int64(h.DataEnd - logHeaderSize)
	if h.Compression == CompressionZstd {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(h.BlockSize)+1))
		if err != nil {
			return err
		}
		r.zstd = d
	}
	return nil
}

// errTruncated: the log ends before its header's data end.
var errTruncated = errors.New("log ends before its data end (truncated?)")

// srcRead reads n bytes of the log's data from src.
func (r *Reader) srcRead(p []byte) error {
	if int64(len(p)) > r.left {
		return fmt.Errorf("%d bytes past the data end", int64(len(p))-r.left)
	}
	n, err := io.ReadFull(r.src, p)
	r.left -= int64(n)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return errTruncated
	}
	return err
}

// nextBlock reads and decompresses the next block of a compressed log.
func (r *Reader) nextBlock() error {
	size, err := r.srcVLQ()
	if err != nil {
		return err
	}
	if size > uint64(r.left) || size > MaxBlockSize+MaxBlockSize/8 {
		return fmt.Errorf("block of %d bytes where %d are left", size, r.left)
	}
	if uint64(cap(r.raw)) < size {
		r.raw = make([]byte, size)
	}
	r.raw = r.raw[:size]
	if err := r.srcRead(r.raw); err != nil {
		return err
	}
	bs := int(r.hdr.BlockSize)
	switch r.hdr.Compression {
	case CompressionSnappy:
		n, err := snappy.DecodedLen(r.raw)
		if err != nil {
			return fmt.Errorf("snappy block: %w", err)
		}
		if n > bs {
			return fmt.Errorf("snappy block of %d bytes, more than the block size %d", n, bs)
		}
		if r.block, err = snappy.Decode(r.block[:cap(r.block)], r.raw); err != nil {
			return fmt.Errorf("snappy block: %w", err)
		}
	case CompressionZstd:
		if r.block, err = r.zstd.DecodeAll(r.raw, r.block[:0]); err != nil {
			return fmt.Errorf("zstd block: %w", err)
		}
		if len(r.block) > bs {
			return fmt.Errorf("zstd block of %d bytes, more than the block size %d", len(r.block), bs)
		}
	}
	r.pos = 0
	return nil
}

// srcVLQ reads a block's size from src.
func (r *Reader) srcVLQ() (uint64, error) {
	var u uint64
	for shift := uint(0); shift < 64; shift += 7 {
		if r.left == 0 {
			return 0, errTruncated
		}
		c, err := r.src.ReadByte()
		if err != nil {
			return 0, errTruncated
		}
		r.left--
		u |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return u, nil
		}
	}
	return 0, errors.New("varint longer than 10 bytes")
}

// atEnd reports whether every byte of the data was read.
func (r *Reader) atEnd() bool {
	return r.left == 0 && r.pos >= len(r.block)
}

// readByte reads one byte of the entries.
func (r *Reader) readByte() (byte, error) {
	if r.hdr.Compression == CompressionNone {
		var b [1]byte
		err := r.srcRead(b[:])
		return b[0], err
	}
	for r.pos >= len(r.block) {
		if r.left == 0 {
			return 0, errors.New("entry cut by the data end")
		}
		if err := r.nextBlock(); err != nil {
			return 0, err
		}
	}
	c := r.block[r.pos]
	r.pos++
	return c, nil
}

// read appends n bytes of the entries to dst, growing it as bytes arrive.
func (r *Reader) read(dst []byte, n uint64) ([]byte, error) {
	dst = dst[:0]
	for n > 0 {
		if r.hdr.Compression == CompressionNone {
			step := min(n, 1<<20)
			if step > uint64(r.left) {
				return nil, errors.New("entry cut by the data end")
			}
			l := len(dst)
			dst = append(dst, make([]byte, step)...)
			if err := r.srcRead(dst[l:]); err != nil {
				return nil, err
			}
			n -= step
			continue
		}
		for r.pos >= len(r.block) {
			if r.left == 0 {
				return nil, errors.New("entry cut by the data end")
			}
			if err := r.nextBlock(); err != nil {
				return nil, err
			}
		}
		m := min(n, uint64(len(r.block)-r.pos))
		dst = append(dst, r.block[r.pos:r.pos+int(m)]...)
		r.pos += int(m)
		n -= m
	}
	return dst, nil
}

func (r *Reader) vlq() (uint64, error) {
	var u uint64
	for shift := uint(0); shift < 64; shift += 7 {
		c, err := r.readByte()
		if err != nil {
			return 0, err
		}
		u |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return u, nil
		}
	}
	return 0, errors.New("varint longer than 10 bytes")
}

// Next reads the next put; false at the end or on an error (Err).
func (r *Reader) Next() bool {
	if r.err != nil {
		return false
	}
	if r.atEnd() {
		if uint64(r.entry) != r.hdr.Puts {
			r.err = &Error{File: r.name, Entry: r.entry, Err: fmt.Errorf("%d entries, the header says %d puts", r.entry, r.hdr.Puts)}
		}
		return false
	}
	if err := r.next(); err != nil {
		r.err = &Error{File: r.name, Entry: r.entry, Err: err}
		return false
	}
	r.entry++
	return true
}

func (r *Reader) next() error {
	if r.inBlock() {
		return nil
	}
	a, err := r.vlq()
	if err != nil {
		return err
	}
	b, err := r.vlq()
	if err != nil {
		return err
	}
	if a == 0 {
		return errors.New("a delete: spangle reads logs of puts only")
	}
	klen, vlen := a-1, b
	if klen > r.hdr.MaxKeyLen || vlen > r.hdr.MaxValueLen || klen > MaxEntrySize || vlen > MaxEntrySize {
		return fmt.Errorf("key of %d bytes, value of %d: the header says at most %d and %d", klen, vlen, r.hdr.MaxKeyLen, r.hdr.MaxValueLen)
	}
	if r.kb, err = r.read(r.kb, klen); err != nil {
		return err
	}
	if r.vb, err = r.read(r.vb, vlen); err != nil {
		return err
	}
	r.k, r.v = r.kb, r.vb
	return nil
}

// inBlock reads the next put when it lies whole in the block being read
// (a compressed log's usual case): its key and value are slices of the
// block, not copies. It reports false, having read nothing, otherwise, or
// when the put is not valid, for the reading byte by byte to fail on.
func (r *Reader) inBlock() bool {
	if r.pos >= len(r.block) {
		return false
	}
	blk := r.block[r.pos:]
	a, n1 := binary.Uvarint(blk)
	if n1 <= 0 || a == 0 {
		return false
	}
	vlen, n2 := binary.Uvarint(blk[n1:])
	klen := a - 1
	if n2 <= 0 || klen > r.hdr.MaxKeyLen || vlen > r.hdr.MaxValueLen || klen > MaxEntrySize || vlen > MaxEntrySize {
		return false
	}
	start := uint64(n1 + n2)
	end := start + klen + vlen
	if end > uint64(len(blk)) {
		return false
	}
	r.k = blk[start : start+klen : start+klen]
	r.v = blk[start+klen : end : end]
	r.pos += int(end)
	return true
}

// Key is the current put's key, valid until the next call to Next.
func (r *Reader) Key() []byte { return r.k }

// Value is the current put's value, valid until the next call to Next.
func (r *Reader) Value() []byte { return r.v }

// Err is the error that stopped Next, nil at the end of the log.
func (r *Reader) Err() error { return r.err }

// Offset is the number of entries read: an error names its entry.
func (r *Reader) Offset() int64 { return r.entry }

// Close releases the zstd decoder; it does not close the input.
func (r *Reader) Close() error {
	if r.zstd != nil {
		r.zstd.Close()
		r.zstd = nil
	}
	return nil
}

// CheckIndex reads the header of a framed-Snappy compressed hash index
// (.spi.sz) from r and checks that it indexes the log whose file ID is
// logID.
func CheckIndex(r io.Reader, name string, logID uint32) error {
	var b [16]byte
	fail := func(err error) error { return &Error{File: name, Entry: -1, Err: err} }
	if _, err := io.ReadFull(snappy.NewReader(r), b[:]); err != nil {
		return fail(fmt.Errorf("index header: %w", err))
	}
	le := binary.LittleEndian
	if m := le.Uint32(b[0:]); m != HashMagic {
		return fail(fmt.Errorf("not a sparkey hash index: magic %08x", m))
	}
	if id := le.Uint32(b[12:]); id != logID {
		return fail(fmt.Errorf("indexes log %08x, not its log's %08x", id, logID))
	}
	return nil
}
