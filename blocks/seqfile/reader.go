package seqfile

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// ReaderOptions configures a Reader. The zero value gives the defaults.
type ReaderOptions struct {
	// BufferSize is the size of the read buffer the Reader puts in front of
	// its input. Default 256 KiB. Ignored when the input is already a
	// *bufio.Reader, which is used as it is.
	BufferSize int
	// MaxSize bounds every length read from the file, and every
	// decompressed size: a header string, a record, a block's buffer before
	// and after decompression. Longer ones fail with ErrTooLarge. Default
	// 256 MiB.
	MaxSize int
	// Share and Gate bound the memory of decompressed buffers (a
	// record-compressed value; a block's four buffers) and of long
	// records when many Readers run at once. With a Gate, a Reader
	// decompresses up to Share bytes on its own; a buffer that takes it
	// beyond Share is decompressed again after passing the Gate, which
	// admits one Reader at a time, up to MaxSize; a length over Share
	// (and the read buffer) is read in the Gate. The Reader leaves the Gate, dropping its buffers,
	// when it next decompresses (the record or block read before is done
	// with) and on Release. So the Readers sharing a Gate hold at most
	// their Shares plus one MaxSize of decompressed bytes (and as much
	// again while a buffer grows). Default: no Gate, each buffer bounded
	// by MaxSize alone.
	Share int
	Gate  Gate
}

// Gate admits one Reader at a time to decompressed buffers beyond its
// ReaderOptions.Share. Enter waits for it; an error stops the Reader
// with it (a cancelled build). Leave lets the next one in.
type Gate interface {
	Enter() error
	Leave()
}

const (
	defaultBufferSize = 256 << 10
	defaultMaxSize    = 256 << 20
	// bigReadStep is the first step in which a length beyond the read
	// buffer is read; each later step at most doubles what was read, so a
	// lying length costs at most about twice the bytes actually present.
	bigReadStep = 64 << 10
)

// Reader reads the records of a SequenceFile in order. It is not safe for
// concurrent use. The zero value is not usable; call NewReader.
type Reader struct {
	br      *bufio.Reader
	name    string
	hdr     Header
	maxSize int
	keyKind wrapKind
	valKind wrapKind
	dec     *decompressor // nil when uncompressed

	off     int64 // bytes of the input parsed so far
	records int64
	err     error
	eof     bool

	rawKey, rawVal []byte
	key, val       []byte

	big  []byte // lengths too long for br's buffer are read here
	vbuf []byte // a decompressed value, for RecordCompressed

	share  int  // ReaderOptions.Share, with a gate
	gate   Gate // nil: buffers bounded by maxSize alone
	inGate bool

	// BlockCompressed state.
	inBlock   bool
	blockLeft int   // records left in the current block
	blockOff  int64 // offset of the current block's sync marker
	blockRec  int   // index of the current record in its block
	bufs      [4]blockBuf
}

// The four buffers of a block, in file order.
const (
	bufKeyLens = iota
	bufKeys
	bufValLens
	bufVals
)

var bufNames = [4]string{"key lengths", "keys", "value lengths", "values"}

// blockBuf is one decompressed block buffer and how far it has been read.
type blockBuf struct {
	b   []byte
	pos int
}

// NewReader reads the header from r and returns a Reader positioned before
// the first record. name is used only in error messages. The Reader buffers
// r itself, unless r is a *bufio.Reader, which it reads from directly. It
// never closes r. Every error it returns, here and from Err, is an *Error.
func NewReader(r io.Reader, name string) (*Reader, error) {
	return NewReaderOptions(r, name, ReaderOptions{})
}

// NewReaderOptions is NewReader with options.
func NewReaderOptions(r io.Reader, name string, opts ReaderOptions) (*Reader, error) {
	if opts.BufferSize <= 0 {
		opts.BufferSize = defaultBufferSize
	}
	if opts.MaxSize <= 0 {
		opts.MaxSize = defaultMaxSize
	}
	opts.MaxSize = min(opts.MaxSize, math.MaxInt32)
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, opts.BufferSize)
	}
	rd := &Reader{br: br, name: name, maxSize: opts.MaxSize, gate: opts.Gate, share: max(opts.Share, 0)}
	if err := rd.readHeader(); err != nil {
		return nil, err
	}
	rd.keyKind = kindOf(rd.hdr.KeyClass)
	rd.valKind = kindOf(rd.hdr.ValueClass)
	return rd, nil
}

// Header returns the file's header. The caller must not modify it.
func (r *Reader) Header() *Header { return &r.hdr }

// Next advances to the next record. It returns false at the end of the file
// or on an error; Err tells which. Once it has returned false it always
// does.
func (r *Reader) Next() bool {
	if r.err != nil || r.eof {
		return false
	}
	var err error
	if r.hdr.Compression == BlockCompressed {
		err = r.nextInBlock()
	} else {
		err = r.nextRecord()
	}
	if err != nil {
		if err == io.EOF {
			r.eof = true
		} else {
			r.err = err
		}
		r.rawKey, r.rawVal, r.key, r.val = nil, nil, nil, nil
		return false
	}
	r.records++
	return true
}

// Key returns the current record's key, unwrapped: a BytesWritable without
// its 4-byte length, a Text without its VInt length, any other class as its
// serialized bytes. The slice is owned by the Reader and valid only until
// the next call to Next; copy it to keep it.
func (r *Reader) Key() []byte { return r.key }

// Value returns the current record's value, unwrapped like Key, with the
// same validity.
func (r *Reader) Value() []byte { return r.val }

// RawKey returns the current record's key as serialized, with the same
// validity as Key.
func (r *Reader) RawKey() []byte { return r.rawKey }

// RawValue returns the current record's value as serialized (after
// decompression), with the same validity as Key.
func (r *Reader) RawValue() []byte { return r.rawVal }

// Err returns the error that stopped Next, or nil at a clean end of file.
// A non-nil error is an *Error.
func (r *Reader) Err() error { return r.err }

// Offset returns how many bytes of the input have been parsed, header
// included. Read-ahead in the buffer is not counted; at a clean end of file
// Offset is the file's size.
func (r *Reader) Offset() int64 { return r.off }

// Records returns how many records Next has returned.
func (r *Reader) Records() int64 { return r.records }

func (r *Reader) errAt(off int64, msg string, cause error) *Error {
	return &Error{File: r.name, Offset: off, Msg: msg, Err: cause}
}

// readErr is errAt for a failed read: io.EOF, which means the input ended
// inside a structure, becomes io.ErrUnexpectedEOF.
func (r *Reader) readErr(off int64, what string, err error) *Error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return r.errAt(off, "truncated "+what, io.ErrUnexpectedEOF)
	}
	return r.errAt(off, "read "+what, err)
}

// atEOF reports whether the input ends here.
func (r *Reader) atEOF() (bool, error) {
	b, err := r.br.Peek(1)
	if len(b) > 0 {
		return false, nil
	}
	if err == io.EOF {
		return true, nil
	}
	return false, err
}

// take consumes the next n bytes and returns them. The slice is valid until
// the next read from the input. On error the bytes read are consumed.
func (r *Reader) take(n int) ([]byte, error) {
	if n <= r.br.Size() {
		b, err := r.br.Peek(n)
		if len(b) < n {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			d, _ := r.br.Discard(len(b))
			r.off += int64(d)
			return nil, err
		}
		d, _ := r.br.Discard(n)
		r.off += int64(d)
		return b, nil
	}
	if r.gate != nil && !r.inGate && n > r.share {
		if err := r.gate.Enter(); err != nil {
			return nil, err
		}
		r.inGate = true
	}
	r.big = r.big[:0]
	for len(r.big) < n {
		have := len(r.big)
		want := min(n, max(2*have, bigReadStep))
		if cap(r.big) < want {
			nb := make([]byte, have, max(want, min(n, 2*cap(r.big))))
			copy(nb, r.big)
			r.big = nb
		}
		r.big = r.big[:want]
		m, err := io.ReadFull(r.br, r.big[have:want])
		r.off += int64(m)
		if err != nil {
			r.big = r.big[:0]
			return nil, err
		}
	}
	return r.big, nil
}

// readVLong reads a Hadoop VLong from the input.
func (r *Reader) readVLong() (int64, error) {
	b, err := r.br.Peek(1)
	if len(b) == 0 {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return 0, err
	}
	n := vintSize(b[0])
	if b, err = r.take(n); err != nil {
		return 0, err
	}
	v, _ := decodeVLong(b)
	return v, nil
}

// readLen reads a VInt length at off, checked to be in [0, MaxSize].
func (r *Reader) readLen(off int64, what string) (int, error) {
	v, err := r.readVLong()
	if err != nil {
		return 0, r.readErr(off, what+" length", err)
	}
	if v < 0 || v > math.MaxInt32 {
		return 0, r.errAt(off, fmt.Sprintf("bad %s length %d", what, v), ErrCorrupt)
	}
	if v > int64(r.maxSize) {
		return 0, r.errAt(off, fmt.Sprintf("%s length %d over limit %d", what, v, r.maxSize), ErrTooLarge)
	}
	return int(v), nil
}

// readHeader parses the header into r.hdr.
func (r *Reader) readHeader() error {
	b, err := r.br.Peek(4)
	switch n := min(len(b), 3); {
	case n == 0 && err == io.EOF:
		return r.errAt(0, "empty file", ErrNotSequenceFile)
	case n == 0:
		return r.readErr(0, "header", err)
	case !bytes.Equal(b[:n], magic[:n]):
		return r.errAt(0, "not a SequenceFile", ErrNotSequenceFile)
	}
	if b, err = r.take(4); err != nil {
		return r.readErr(0, "header", err)
	}
	h := &r.hdr
	h.Version = b[3]
	if h.Version < minVersion || h.Version > maxVersion {
		return r.errAt(3, fmt.Sprintf("unsupported version %d", h.Version), ErrUnsupportedVersion)
	}
	if h.KeyClass, err = r.readString("key class"); err != nil {
		return err
	}
	if h.ValueClass, err = r.readString("value class"); err != nil {
		return err
	}
	off := r.off
	if b, err = r.take(2); err != nil {
		return r.readErr(off, "header", err)
	}
	compressed, block := b[0] != 0, b[1] != 0 // Java's readBoolean
	switch {
	case block && !compressed:
		return r.errAt(off, "block compression flag without compression", ErrCorrupt)
	case block:
		h.Compression = BlockCompressed
	case compressed:
		h.Compression = RecordCompressed
	}
	if compressed {
		off = r.off
		if h.Codec, err = r.readString("codec"); err != nil {
			return err
		}
		kind, ok := lookupCodec(h.Codec)
		if !ok {
			return r.errAt(off, fmt.Sprintf("unsupported codec %q", h.Codec), ErrUnsupportedCodec)
		}
		r.dec = &decompressor{kind: kind, limit: r.maxSize, max: r.maxSize}
	}
	if h.Version >= metadataVersion {
		off = r.off
		if b, err = r.take(4); err != nil {
			return r.readErr(off, "metadata count", err)
		}
		n := int32(binary.BigEndian.Uint32(b))
		if n < 0 {
			return r.errAt(off, fmt.Sprintf("bad metadata count %d", n), ErrCorrupt)
		}
		for i := int32(0); i < n; i++ {
			if r.off > int64(r.maxSize) {
				return r.errAt(off, "header over limit", ErrTooLarge)
			}
			var m Metadata
			if m.Key, err = r.readString("metadata key"); err != nil {
				return err
			}
			if m.Value, err = r.readString("metadata value"); err != nil {
				return err
			}
			h.Metadata = append(h.Metadata, m)
		}
	}
	off = r.off
	if b, err = r.take(syncSize); err != nil {
		return r.readErr(off, "sync marker", err)
	}
	copy(h.Sync[:], b)
	return nil
}

// readString reads a Text-serialized string.
func (r *Reader) readString(what string) (string, error) {
	off := r.off
	n, err := r.readLen(off, what)
	if err != nil {
		return "", err
	}
	b, err := r.take(n)
	if err != nil {
		return "", r.readErr(off, what, err)
	}
	return string(b), nil
}

// readSync consumes a sync escape and marker at off and checks the marker.
func (r *Reader) readSync(off int64) error {
	b, err := r.take(4 + syncSize)
	if err != nil {
		return r.readErr(off, "sync marker", err)
	}
	if int32(binary.BigEndian.Uint32(b)) != syncEscape {
		return r.errAt(off, "missing sync escape", ErrCorrupt)
	}
	if !bytes.Equal(b[4:], r.hdr.Sync[:]) {
		return r.errAt(off, "bad sync marker", ErrCorrupt)
	}
	return nil
}

// nextRecord reads one record of an uncompressed or record-compressed file.
func (r *Reader) nextRecord() error {
	r.leaveGate() // the record before is done with
	for {
		start := r.off
		b, err := r.br.Peek(8)
		if len(b) < 8 {
			if len(b) == 0 && err == io.EOF {
				return io.EOF
			}
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return r.readErr(start, "record header", err)
		}
		recLen := int32(binary.BigEndian.Uint32(b))
		if recLen == syncEscape {
			if err := r.readSync(start); err != nil {
				return err
			}
			continue
		}
		keyLen := int32(binary.BigEndian.Uint32(b[4:]))
		if recLen < 0 || keyLen < 0 || keyLen > recLen {
			return r.errAt(start, fmt.Sprintf("bad record length %d, key length %d", recLen, keyLen), ErrCorrupt)
		}
		if int(recLen) > r.maxSize {
			return r.errAt(start, fmt.Sprintf("record length %d over limit %d", recLen, r.maxSize), ErrTooLarge)
		}
		r.br.Discard(8)
		r.off += 8
		rec, err := r.take(int(recLen))
		if err != nil {
			return r.readErr(start, "record", err)
		}
		r.rawKey = rec[:keyLen:keyLen]
		r.rawVal = rec[keyLen:]
		if r.dec != nil {
			if r.vbuf, err = r.decompress(r.vbuf, r.rawVal, 0); err != nil {
				return r.decompressErr(start, "value", err)
			}
			r.rawVal = r.vbuf
		}
		return r.unwrap(start)
	}
}

// nextInBlock returns the next record of a block-compressed file, reading a
// new block when the current one is used up.
func (r *Reader) nextInBlock() error {
	for r.blockLeft == 0 {
		if err := r.finishBlock(); err != nil {
			return err
		}
		if err := r.readBlock(); err != nil {
			return err
		}
	}
	r.blockLeft--
	r.blockRec++
	var err error
	if r.rawKey, err = r.blockField(bufKeyLens, bufKeys); err != nil {
		return err
	}
	if r.rawVal, err = r.blockField(bufValLens, bufVals); err != nil {
		return err
	}
	return r.unwrap(r.blockOff)
}

// blockField takes the next length from buffer lens and that many bytes
// from buffer data.
func (r *Reader) blockField(lens, data int) ([]byte, error) {
	lb, db := &r.bufs[lens], &r.bufs[data]
	v, n := decodeVLong(lb.b[lb.pos:])
	if n == 0 {
		return nil, r.errAt(r.blockOff, fmt.Sprintf("block record %d: %s buffer too short", r.blockRec, bufNames[lens]), ErrCorrupt)
	}
	lb.pos += n
	if v < 0 || v > int64(len(db.b)-db.pos) {
		return nil, r.errAt(r.blockOff, fmt.Sprintf("block record %d: bad length %d for %s", r.blockRec, v, bufNames[data]), ErrCorrupt)
	}
	p := db.b[db.pos : db.pos+int(v) : db.pos+int(v)]
	db.pos += int(v)
	return p, nil
}

// finishBlock checks that the block just read was used up exactly.
func (r *Reader) finishBlock() error {
	if !r.inBlock {
		return nil
	}
	r.inBlock = false
	for i := range r.bufs {
		if left := len(r.bufs[i].b) - r.bufs[i].pos; left != 0 {
			return r.errAt(r.blockOff, fmt.Sprintf("block %s buffer has %d bytes left over", bufNames[i], left), ErrCorrupt)
		}
	}
	return nil
}

// readBlock reads and decompresses the next block. It returns io.EOF at a
// clean end of file.
func (r *Reader) readBlock() error {
	r.leaveGate() // the block before is done with
	start := r.off
	if eof, err := r.atEOF(); eof {
		return io.EOF
	} else if err != nil {
		return r.readErr(start, "block", err)
	}
	if err := r.readSync(start); err != nil {
		return err
	}
	count, err := r.readVLong()
	if err != nil {
		return r.readErr(start, "block record count", err)
	}
	if count < 0 || count > math.MaxInt32 {
		return r.errAt(start, fmt.Sprintf("bad block record count %d", count), ErrCorrupt)
	}
	for i := range r.bufs {
		off := r.off
		n, err := r.readLen(off, "block "+bufNames[i])
		if err != nil {
			return err
		}
		c, err := r.take(n)
		if err != nil {
			return r.readErr(off, "block "+bufNames[i], err)
		}
		before := 0 // this block's buffers so far
		for j := range i {
			before += cap(r.bufs[j].b)
		}
		out, err := r.decompress(r.bufs[i].b, c, before)
		r.bufs[i] = blockBuf{b: out}
		if err != nil {
			return r.decompressErr(off, "block "+bufNames[i], err)
		}
	}
	// Every record has a length of at least one byte in each lengths
	// buffer, which bounds the count by data actually present.
	if count > int64(len(r.bufs[bufKeyLens].b)) || count > int64(len(r.bufs[bufValLens].b)) {
		return r.errAt(start, fmt.Sprintf("block record count %d exceeds its lengths buffers", count), ErrCorrupt)
	}
	r.inBlock = true
	r.blockLeft = int(count)
	r.blockOff = start
	r.blockRec = -1
	return nil
}

// unwrap sets r.key and r.val from the raw fields.
func (r *Reader) unwrap(off int64) error {
	var ok bool
	if r.key, ok = unwrap(r.keyKind, r.rawKey); !ok {
		return r.unwrapErr(off, r.hdr.KeyClass+" key")
	}
	if r.val, ok = unwrap(r.valKind, r.rawVal); !ok {
		return r.unwrapErr(off, r.hdr.ValueClass+" value")
	}
	return nil
}

func (r *Reader) unwrapErr(off int64, what string) error {
	msg := "bad " + what + ": length prefix does not match"
	if r.inBlock {
		msg = fmt.Sprintf("block record %d: %s", r.blockRec, msg)
	}
	return r.errAt(off, msg, ErrCorrupt)
}

// unwrap strips the length prefix of a BytesWritable or Text, which must
// equal the length of what follows.
func unwrap(k wrapKind, raw []byte) ([]byte, bool) {
	switch k {
	case wrapBytes:
		if len(raw) < 4 || binary.BigEndian.Uint32(raw) != uint32(len(raw)-4) {
			return nil, false
		}
		return raw[4:], true
	case wrapText:
		v, n := decodeVLong(raw)
		if n == 0 || v != int64(len(raw)-n) {
			return nil, false
		}
		return raw[n:], true
	}
	return raw, true
}

// decompress decodes src into dst[:0] (see decompressor.decompress).
// With a gate, outside it, the output is bounded by the share left
// beside the held bytes of other buffers; output beyond it is decoded
// again in the gate, bounded by maxSize.
func (r *Reader) decompress(dst, src []byte, held int) ([]byte, error) {
	if r.gate == nil || r.inGate {
		r.dec.limit = r.maxSize
		return r.dec.decompress(dst, src)
	}
	r.dec.limit = max(min(r.share-held, r.maxSize), 0)
	out, err := r.dec.decompress(dst, src)
	if !errors.Is(err, ErrTooLarge) || r.dec.limit == r.maxSize {
		return out, err
	}
	if err := r.gate.Enter(); err != nil {
		return out, err
	}
	r.inGate = true
	r.dec.limit = r.maxSize
	return r.dec.decompress(out, src)
}

// decompressErr is the error of a failed decompression of what at off.
func (r *Reader) decompressErr(off int64, what string, err error) error {
	if errors.Is(err, ErrTooLarge) {
		return r.errAt(off, fmt.Sprintf("decompressed %s over limit %d", what, r.maxSize), ErrTooLarge)
	}
	return r.errAt(off, "decompress "+what, err)
}

// leaveGate drops the decompressed buffers and leaves the gate, if in
// it: what they held has been read. Called before a record or block is
// read: the one before is done with.
func (r *Reader) leaveGate() {
	if !r.inGate {
		return
	}
	r.vbuf, r.big = nil, nil
	for i := range r.bufs {
		r.bufs[i] = blockBuf{}
	}
	r.inGate = false
	r.gate.Leave()
}

// Release leaves the gate (ReaderOptions.Gate) if the Reader is in it and
// drops its buffers; the current record's Key and Value are no longer
// valid. The Reader must not be used after Release; it may be called
// more than once.
func (r *Reader) Release() {
	r.leaveGate()
	r.vbuf, r.big = nil, nil
	r.bufs = [4]blockBuf{}
	r.rawKey, r.rawVal, r.key, r.val = nil, nil, nil, nil
	r.eof = true
}
