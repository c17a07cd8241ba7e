package blocks

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/cespare/xxhash/v2"
)

// A delta version's deleted keys are in its _DELETES file:
//
//	"SPGDEL1\n"                 8 bytes of magic
//	uvarint(len(key)) key       per key, 1 to 32768 bytes, any order
//	0x00                        the end (no key is empty)
//	count                       uint64 little-endian: the keys written
//	xxh64                       uint64 little-endian: XXH64 (seed 0) of every
//	                            byte before count, magic and 0x00 included
//
// and nothing after. A file cut anywhere, or altered, fails to read: its
// end, count or hash is missing or wrong.

// DeletesFileName is the file of a delta version listing its deleted keys.
const DeletesFileName = "_DELETES"

// BaseFileName is the file that makes a version a delta: its content is
// the base version's name.
const BaseFileName = "_BASE"

const deletesMagic = "SPGDEL1\n"

// ErrTruncatedDeletes: a _DELETES file ends before its trailer, or its
// trailer does not match what precedes it.
var ErrTruncatedDeletes = errors.New("truncated or damaged deletions file")

// DeletesWriter writes a _DELETES file.
type DeletesWriter struct {
	w     *bufio.Writer
	h     *xxhash.Digest
	count uint64
	err   error
}

// NewDeletesWriter starts a _DELETES file on w.
func NewDeletesWriter(w io.Writer) *DeletesWriter {
	d := &DeletesWriter{w: bufio.NewWriter(w), h: xxhash.New()}
	d.write([]byte(deletesMagic))
	return d
}

func (d *DeletesWriter) write(b []byte) {
	if d.err != nil {
		return
	}
	_, _ = d.h.Write(b)
	_, d.err = d.w.Write(b)
}

// Add writes one deleted key.
func (d *DeletesWriter) Add(key []byte) error {
	if len(key) == 0 || len(key) > maxKeySize {
		return fmt.Errorf("%w: deleted key of %d bytes (1 to %d)", ErrBadInput, len(key), maxKeySize)
	}
	var pre [binary.MaxVarintLen64]byte
	d.write(pre[:binary.PutUvarint(pre[:], uint64(len(key)))])
	d.write(key)
	d.count++
	return d.err
}

// Close writes the trailer and flushes; it does not close the writer
// given to NewDeletesWriter.
func (d *DeletesWriter) Close() error {
	d.write([]byte{0})
	if d.err != nil {
		return d.err
	}
	var t [16]byte
	binary.LittleEndian.PutUint64(t[:8], d.count)
	binary.LittleEndian.PutUint64(t[8:], d.h.Sum64())
	if _, err := d.w.Write(t[:]); err != nil {
		return err
	}
	return d.w.Flush()
}

// deletesReader reads a _DELETES file as records of empty values (a
// recordReader).
type deletesReader struct {
	name string
	r    *bufio.Reader
	h    *xxhash.Digest
	key  []byte
	n    uint64
	off  int64
	err  error
	done bool
}

func newDeletesReader(r *bufio.Reader, name string) (*deletesReader, error) {
	d := &deletesReader{name: name, r: r, h: xxhash.New()}
	var magic [len(deletesMagic)]byte
	if _, err := io.ReadFull(r, magic[:]); err != nil || string(magic[:]) != deletesMagic {
		return nil, fmt.Errorf("%w: %s: not a deletions file (want the magic %q)", ErrBadInput, name, deletesMagic)
	}
	_, _ = d.h.Write(magic[:])
	d.off = int64(len(magic))
	return d, nil
}

func (d *deletesReader) fail(format string, args ...any) bool {
	d.err = fmt.Errorf("%w: %s at byte %d: %s", ErrTruncatedDeletes, d.name, d.off, fmt.Sprintf(format, args...))
	return false
}

func (d *deletesReader) Next() bool {
	if d.done || d.err != nil {
		return false
	}
	n, err := binary.ReadUvarint(d.r)
	if err != nil {
		return d.fail("no end marker: %v", err)
	}
	var pre [binary.MaxVarintLen64]byte
	_, _ = d.h.Write(pre[:binary.PutUvarint(pre[:], n)])
	if n == 0 {
		d.done = true
		var t [16]byte
		if _, err := io.ReadFull(d.r, t[:]); err != nil {
			return d.fail("trailer cut short")
		}
		if c, h := binary.LittleEndian.Uint64(t[:8]), binary.LittleEndian.Uint64(t[8:]); c != d.n || h != d.h.Sum64() {
			return d.fail("trailer says %d keys, hash %016x; read %d keys, hash %016x", c, h, d.n, d.h.Sum64())
		}
		if _, err := d.r.ReadByte(); err != io.EOF {
			return d.fail("bytes after the trailer")
		}
		return false
	}
	if n > maxKeySize {
		return d.fail("a key of %d bytes (at most %d)", n, maxKeySize)
	}
	d.key = append(d.key[:0], make([]byte, n)...)
	if _, err := io.ReadFull(d.r, d.key); err != nil {
		return d.fail("key cut short")
	}
	_, _ = d.h.Write(d.key)
	d.off += int64(uvarintLen(n)) + int64(n)
	d.n++
	return true
}

func (d *deletesReader) Key() []byte   { return d.key }
func (d *deletesReader) Value() []byte { return nil }
func (d *deletesReader) Err() error    { return d.err }
func (d *deletesReader) Offset() int64 { return d.off }
