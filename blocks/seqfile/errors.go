package seqfile

import (
	"errors"
	"strconv"
)

// Sentinel causes carried by *Error. Test for them with errors.Is; a
// truncated file carries io.ErrUnexpectedEOF, and a failed decompression the
// codec's own error.
var (
	// ErrNotSequenceFile means the file does not start with "SEQ".
	ErrNotSequenceFile = errors.New("seqfile: not a SequenceFile")
	// ErrUnsupportedVersion means a header version other than 5 or 6.
	ErrUnsupportedVersion = errors.New("seqfile: unsupported version")
	// ErrUnsupportedCodec means a compression codec this package cannot decode.
	ErrUnsupportedCodec = errors.New("seqfile: unsupported codec")
	// ErrTooLarge means a length, or a decompressed size, above the
	// reader's MaxSize.
	ErrTooLarge = errors.New("seqfile: size over limit")
	// ErrCorrupt means a structural inconsistency: a bad sync marker, a
	// negative length, a wrapped length that does not match, and the like.
	ErrCorrupt = errors.New("seqfile: corrupt file")
)

// Error describes corrupt, truncated or unsupported input, or a failure to
// read it. Every error returned by a Reader is an *Error.
type Error struct {
	// File is the name given to NewReader; it may be empty.
	File string
	// Offset is the position in the input, in bytes from its start, of the
	// structure that could not be read (a record, a block, a header field).
	Offset int64
	// Msg says what was wrong, e.g. "bad sync marker".
	Msg string
	// Err is the cause: one of this package's sentinels, io.ErrUnexpectedEOF,
	// a codec's error, or an error of the underlying reader. It may be nil.
	Err error
}

// Error returns e.g. "seqfile: part-00003: offset 1234: bad sync marker".
// The cause is appended unless it is one of this package's sentinels, which
// Msg already states.
func (e *Error) Error() string {
	s := "seqfile: "
	if e.File != "" {
		s += e.File + ": "
	}
	s += "offset " + strconv.FormatInt(e.Offset, 10) + ": " + e.Msg
	if e.Err != nil && !isSentinel(e.Err) {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

func isSentinel(err error) bool {
	switch err {
	case ErrNotSequenceFile, ErrUnsupportedVersion, ErrUnsupportedCodec, ErrTooLarge, ErrCorrupt:
		return true
	}
	return false
}
