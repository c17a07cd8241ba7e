package blocks

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/spangledb/spangle/blocks/avroin"
	"github.com/spangledb/spangle/blocks/parquetin"
	"github.com/spangledb/spangle/blocks/seqfile"
	"github.com/spangledb/spangle/blocks/sparkey"
)

// Format is the format of a version's source files.
type Format string

// Formats. FormatAuto detects each file's format from its first bytes.
const (
	FormatAuto         Format = ""
	FormatSequenceFile Format = "sequencefile"
	FormatParquet      Format = "parquet"
	FormatAvro         Format = "avro"
	FormatSparkey      Format = "sparkey"
)

// ParseFormat reads a format's name; "" and "auto" are FormatAuto.
func ParseFormat(s string) (Format, error) {
	switch f := Format(strings.ToLower(s)); f {
	case "", "auto":
		return FormatAuto, nil
	case FormatSequenceFile, FormatParquet, FormatAvro, FormatSparkey:
		return f, nil
	}
	return "", fmt.Errorf("%w: unknown input format %q (want auto, sequencefile, parquet, avro or sparkey)", ErrInvalidSpec, s)
}

// DetectFormat names the format whose magic bytes head begins with, or
// returns "" when none does.
func DetectFormat(head []byte) Format {
	switch {
	case len(head) >= 4 && string(head[:3]) == "SEQ":
		return FormatSequenceFile
	case len(head) >= 4 && string(head[:4]) == parquetin.Magic:
		return FormatParquet
	case len(head) >= 4 && string(head[:4]) == avroin.Magic:
		return FormatAvro
	case len(head) >= 4 && binary.LittleEndian.Uint32(head) == sparkey.LogMagic:
		return FormatSparkey
	}
	return ""
}

// recordReader reads one source file's records in order.
type recordReader interface {
	Next() bool
	Key() []byte   // valid until the next call to Next
	Value() []byte // valid until the next call to Next
	Err() error
	// Offset is where the next record starts, for errors: a byte offset
	// in a SequenceFile, a row number in a Parquet file, the block's
	// offset in an Avro file, an entry number in a Sparkey log.
	Offset() int64
}

// inputBuffer is the read buffer in front of a source file.
const inputBuffer = 256 << 10

// openInput opens a source file's reader for its format. bytes, if not
// nil, counts the bytes read from the source. The closer releases
// everything the reader holds, the source file included.
func (b *builder) openInput(ctx context.Context, i int, bytes *atomic.Int64) (recordReader, io.Closer, error) {
	f := b.spec.Files[i]
	rc, err := f.Open(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", f.Name, err)
	}
	var r io.Reader = rc
	if bytes != nil {
		r = &countingReader{r: rc, n: bytes}
	}
	br := bufio.NewReaderSize(r, inputBuffer)
	if b.isDeleteFile(i) {
		dr, err := newDeletesReader(br, f.Name)
		if err != nil {
			_ = rc.Close()
			return nil, nil, err
		}
		return dr, rc, nil
	}
	format := b.spec.Format
	if b.sparkey != nil {
		format = FormatSparkey
	}
	if format == FormatAuto {
		head, err := br.Peek(4)
		if format = DetectFormat(head); format == "" {
			_ = rc.Close()
			if err != nil && err != io.EOF {
				return nil, nil, fmt.Errorf("read %s: %w", f.Name, err)
			}
			return nil, nil, fmt.Errorf("%w: %s: unknown format (first bytes %q): want a SequenceFile, a Parquet file, an Avro container file or a Sparkey log (.spl)",
				ErrBadInput, f.Name, head)
		}
	}
	var rr recordReader
	closer := io.Closer(rc)
	switch format {
	case FormatSequenceFile:
		var sr *seqfile.Reader
		if sr, err = seqfile.NewReaderOptions(br, f.Name, b.seqfileOptions(ctx)); err == nil {
			rr, closer = sr, releaseCloser{sr, rc}
		}
	case FormatParquet:
		rr, closer, err = b.openParquet(ctx, rc, br, i, bytes)
	case FormatSparkey:
		if b.sparkey == nil {
			err = fmt.Errorf("%w: %s is a Sparkey log: name it .spl, beside its .spi.sz index", ErrBadInput, f.Name)
			break
		}
		rr, closer, err = b.openSparkey(ctx, rc, br, i)
	case FormatAvro:
		var ar *avroin.Reader
		if ar, err = avroin.NewReader(br, f.Name, avroin.Options{Key: b.spec.KeyField, Value: b.spec.ValueField}); err == nil {
			rr, closer = ar, closerFunc(func() error { _ = ar.Close(); return rc.Close() })
		}
	default:
		err = fmt.Errorf("%w: input format %q", ErrInvalidSpec, format)
	}
	if err != nil {
		_ = closer.Close()
		return nil, nil, err
	}
	return rr, closer, nil
}
