// Package avroin reads key-value records from Avro object container files:
// two fields of the file's record schema hold the keys and the values.
// github.com/hamba/avro/v2 parses the schema; the container (header,
// blocks, codecs) and the records' binary encoding are read here, with
// every length and count bounded by the bytes present (hamba's decoder
// skips an array of a corrupt count for as long as the count says).
package avroin

import (
	"bufio"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/hamba/avro/v2"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
)

// Magic is the first four bytes of an Avro object container file.
const Magic = "Obj\x01"

// Default field names.
const (
	DefaultKey   = "key"
	DefaultValue = "value"
)

// MaxBlockSize bounds a block's size, compressed and not, and a header's
// metadata: longer ones are refused before anything is allocated.
const MaxBlockSize = 256 << 20

// Options name the fields read. "" means the default.
type Options struct {
	Key, Value string
}

// ErrFormat is wrapped by every error about a file's content.
var ErrFormat = errors.New("avroin: bad avro input")

// Error reports a file that cannot be read, naming the file, the byte
// offset of the block (or header) and the reason. errors.Is(err,
// ErrFormat) is true.
type Error struct {
	File   string
	Offset int64
	Err    error
}

func (e *Error) Error() string {
	return fmt.Sprintf("avro file %s: offset %d: %v", e.File, e.Offset, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrFormat) true.
func (e *Error) Is(target error) bool { return target == ErrFormat }

// Reader reads the records of one container file in order. It is not safe
// for concurrent use.
type Reader struct {
	br     *bufio.Reader
	name   string
	off    int64 // bytes of the input consumed
	codec  string
	sync   [16]byte
	fields []avro.Schema // the record's, in order
	keyI   int           // index of the key field
	valI   int           // index of the value field
	keyF   string
	valF   string
	dec    decoder // of the block being read
	left   int64   // records left in the block
	blkOff int64   // offset of the block being read
	raw    []byte
	buf    []byte
	zstd   *zstd.Decoder
	err    error
	k, v   []byte
	kb, vb [8]byte
	n      int64
}

// NewReader reads the header of the container file r (named name in
// errors) and checks that its schema is a record with the key and value
// fields.
func NewReader(r io.Reader, name string, opts Options) (*Reader, error) {
	if opts.Key == "" {
		opts.Key = DefaultKey
	}
	if opts.Value == "" {
		opts.Value = DefaultValue
	}
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 256<<10)
	}
	rd := &Reader{br: br, name: name, keyF: opts.Key, valF: opts.Value}
	if err := rd.readHeader(); err != nil {
		rd.Close()
		return nil, &Error{File: name, Offset: rd.off, Err: err}
	}
	return rd, nil
}

func (r *Reader) readHeader() error {
	var magic [4]byte
	if err := r.full(magic[:]); err != nil {
		return fmt.Errorf("header: %w", err)
	}
	if string(magic[:]) != Magic {
		return fmt.Errorf("not an avro container file: first bytes %q", magic[:])
	}
	meta := map[string][]byte{}
	total := 0
	for {
		n, err := r.long()
		if err != nil {
			return fmt.Errorf("metadata: %w", err)
		}
		if n == 0 {
			break
		}
		if n < 0 {
			n = -n
			if _, err := r.long(); err != nil { // the block's size
				return fmt.Errorf("metadata: %w", err)
			}
		}
		for range n {
			k, err := r.bytes(MaxBlockSize - total)
			if err != nil {
				return fmt.Errorf("metadata: %w", err)
			}
			v, err := r.bytes(MaxBlockSize - total - len(k))
			if err != nil {
				return fmt.Errorf("metadata: %w", err)
			}
			total += len(k) + len(v)
			meta[string(k)] = v
		}
	}
	if err := r.full(r.sync[:]); err != nil {
		return fmt.Errorf("header: %w", err)
	}
	r.codec = string(meta["avro.codec"])
	switch r.codec {
	case "":
		r.codec = "null"
	case "null", "deflate", "snappy":
	case "zstandard":
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(MaxBlockSize))
		if err != nil {
			return err
		}
		r.zstd = d
	default:
		return fmt.Errorf("codec %q: want null, deflate, snappy or zstandard", r.codec)
	}
	s, err := avro.ParseBytes(meta["avro.schema"])
	if err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	rs, ok := s.(*avro.RecordSchema)
	if !ok {
		return fmt.Errorf("schema is a %s: want a record with fields %q and %q", s.Type(), r.keyF, r.valF)
	}
	for _, want := range []struct {
		role, name string
		index      *int
	}{{"key", r.keyF, &r.keyI}, {"value", r.valF, &r.valI}} {
		found := false
		for i, f := range rs.Fields() {
			if f.Name() == want.name {
				found, *want.index = true, i
				if err := checkType(f.Type()); err != nil {
					return fmt.Errorf("%s field %q: %w", want.role, want.name, err)
				}
			}
		}
		if !found {
			var names []string
			for _, f := range rs.Fields() {
				names = append(names, f.Name())
			}
			return fmt.Errorf("no %s field %q in record %s (fields: %q)", want.role, want.name, rs.FullName(), names)
		}
	}
	for _, f := range rs.Fields() {
		r.fields = append(r.fields, f.Type())
	}
	return nil
}

// checkType accepts bytes, strings, fixed, numbers and booleans, and
// unions of one of them with null.
func checkType(s avro.Schema) error {
	switch s.Type() {
	case avro.Bytes, avro.String, avro.Fixed, avro.Int, avro.Long, avro.Float, avro.Double, avro.Boolean:
		return nil
	case avro.Union:
		u := s.(*avro.UnionSchema)
		for _, t := range u.Types() {
			if t.Type() == avro.Null {
				continue
			}
			if err := checkType(t); err != nil || t.Type() == avro.Union {
				return fmt.Errorf("union %s: want null and one of bytes, string, fixed, int, long, float, double or boolean", s.String())
			}
		}
		return nil
	}
	return fmt.Errorf("type %s: want bytes, string, fixed, int, long, float, double or boolean", s.Type())
}

// Next reads the next record; false at the end or on an error (Err).
func (r *Reader) Next() (ok bool) {
	if r.err != nil {
		return false
	}
	defer func() {
		if p := recover(); p != nil { // the library's, on data it did not expect
			r.err = &Error{File: r.name, Offset: r.blkOff, Err: fmt.Errorf("malformed record: %v", p)}
			ok = false
		}
	}()
	for r.left == 0 {
		if n := r.dec.left(); n > 0 {
			r.err = &Error{File: r.name, Offset: r.blkOff, Err: fmt.Errorf("%d bytes after the block's last record", n)}
			return false
		}
		more, err := r.readBlock()
		if err != nil {
			r.err = &Error{File: r.name, Offset: r.blkOff, Err: err}
			return false
		}
		if !more {
			return false
		}
	}
	var k, v []byte
	var kNull, vNull bool
	for i, f := range r.fields {
		var err error
		switch i {
		case r.keyI:
			k, kNull, err = r.dec.value(f, r.kb[:])
			if i == r.valI {
				v, vNull = k, kNull
			}
		case r.valI:
			v, vNull, err = r.dec.value(f, r.vb[:])
		default:
			err = r.dec.skip(f, 0)
		}
		if err != nil {
			r.err = &Error{File: r.name, Offset: r.blkOff, Err: fmt.Errorf("record %d, field %d: %w", r.n, i, err)}
			return false
		}
	}
	if kNull {
		r.err = &Error{File: r.name, Offset: r.blkOff, Err: fmt.Errorf("record %d: null key", r.n)}
		return false
	}
	if vNull {
		v = nil // a null value is stored empty
	}
	r.k, r.v = k, v
	r.left--
	r.n++
	return true
}

// readBlock reads the next block; false at the end of the file.
func (r *Reader) readBlock() (bool, error) {
	r.blkOff = r.off
	if _, err := r.br.Peek(1); err == io.EOF {
		return false, nil
	}
	count, err := r.long()
	if err != nil {
		return false, fmt.Errorf("block: %w", err)
	}
	size, err := r.long()
	if err != nil {
		return false, fmt.Errorf("block: %w", err)
	}
	if count < 0 || size < 0 || size > MaxBlockSize || count > size { // a record takes a byte at least
		return false, fmt.Errorf("block of %d records in %d bytes: at most %d bytes", count, size, MaxBlockSize)
	}
	if cap(r.raw) < int(size) {
		r.raw = make([]byte, size)
	}
	r.raw = r.raw[:size]
	if err := r.full(r.raw); err != nil {
		return false, fmt.Errorf("block: %w", err)
	}
	var sync [16]byte
	if err := r.full(sync[:]); err != nil {
		return false, fmt.Errorf("block: %w", err)
	}
	if sync != r.sync {
		return false, errors.New("block: sync marker differs from the header's")
	}
	data, err := r.decompress(r.raw)
	if err != nil {
		return false, fmt.Errorf("block: %s: %w", r.codec, err)
	}
	r.dec = decoder{b: data}
	r.left = count
	return true, nil
}

func (r *Reader) decompress(b []byte) ([]byte, error) {
	switch r.codec {
	case "deflate":
		r.buf = r.buf[:0]
		w := bytes.NewBuffer(r.buf)
		n, err := io.Copy(w, io.LimitReader(flate.NewReader(bytes.NewReader(b)), MaxBlockSize+1))
		if err == nil && n > MaxBlockSize {
			err = fmt.Errorf("decompresses to more than %d bytes", MaxBlockSize)
		}
		r.buf = w.Bytes()
		return r.buf, err
	case "snappy":
		if len(b) < 4 {
			return nil, errors.New("no checksum")
		}
		data, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
		n, err := snappy.DecodedLen(data)
		if err != nil {
			return nil, err
		}
		if n > MaxBlockSize {
			return nil, fmt.Errorf("decompresses to %d bytes, more than %d", n, MaxBlockSize)
		}
		if r.buf, err = snappy.Decode(r.buf[:cap(r.buf)], data); err != nil {
			return nil, err
		}
		if crc32.ChecksumIEEE(r.buf) != sum {
			return nil, errors.New("checksum mismatch")
		}
		return r.buf, nil
	case "zstandard":
		var err error
		r.buf, err = r.zstd.DecodeAll(b, r.buf[:0])
		return r.buf, err
	}
	return b, nil
}

// full reads len(p) bytes.
func (r *Reader) full(p []byte) error {
	n, err := io.ReadFull(r.br, p)
	r.off += int64(n)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// long reads a zig-zag varint.
func (r *Reader) long() (int64, error) {
	var u uint64
	for shift := uint(0); ; shift += 7 {
		if shift >= 64 {
			return 0, errors.New("varint longer than 10 bytes")
		}
		c, err := r.br.ReadByte()
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		r.off++
		u |= uint64(c&0x7f) << shift
		if c < 0x80 {
			break
		}
	}
	return int64(u>>1) ^ -int64(u&1), nil
}

// bytes reads a length-prefixed byte string of at most max bytes.
func (r *Reader) bytes(max int) ([]byte, error) {
	n, err := r.long()
	if err != nil {
		return nil, err
	}
	if n < 0 || n > int64(max) {
		return nil, fmt.Errorf("string of %d bytes: at most %d", n, max)
	}
	b := make([]byte, n)
	return b, r.full(b)
}

// Key is the current record's key, valid until the next call to Next.
func (r *Reader) Key() []byte { return r.k }

// Value is the current record's value, valid until the next call to Next.
func (r *Reader) Value() []byte { return r.v }

// Err is the error that stopped Next, nil at the end of the file.
func (r *Reader) Err() error { return r.err }

// Offset is the byte offset of the block being read.
func (r *Reader) Offset() int64 { return r.blkOff }

// Close releases the zstd decoder; it does not close the input.
func (r *Reader) Close() error {
	if r.zstd != nil {
		r.zstd.Close()
		r.zstd = nil
	}
	return nil
}
