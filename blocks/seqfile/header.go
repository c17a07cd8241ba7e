package seqfile

import (
	"encoding/binary"
	"strconv"
)

// Compression is the compression type recorded in a file's header.
type Compression int

const (
	// None: records are stored as they are.
	None Compression = iota
	// RecordCompressed: each value is compressed on its own; keys are not.
	RecordCompressed
	// BlockCompressed: keys and values are gathered into blocks, each
	// compressed as four buffers (key lengths, keys, value lengths, values).
	BlockCompressed
)

// String returns Hadoop's name for c: "NONE", "RECORD" or "BLOCK".
func (c Compression) String() string {
	switch c {
	case None:
		return "NONE"
	case RecordCompressed:
		return "RECORD"
	case BlockCompressed:
		return "BLOCK"
	}
	return "Compression(" + strconv.Itoa(int(c)) + ")"
}

// Java class names of the Writables that Key and Value unwrap, and that
// Writer wraps. Any other class is passed through as serialized bytes.
const (
	BytesWritable = "org.apache.hadoop.io.BytesWritable"
	Text          = "org.apache.hadoop.io.Text"
)

// Header is a SequenceFile header.
type Header struct {
	Version     byte // 5 or 6
	KeyClass    string
	ValueClass  string
	Compression Compression
	Codec       string     // Java class name; "" when uncompressed
	Metadata    []Metadata // in file order; always empty in version 5
	Sync        [16]byte
}

// Metadata is one entry of a version 6 header's metadata.
type Metadata struct{ Key, Value string }

const (
	minVersion      = 5
	maxVersion      = 6
	metadataVersion = 6
	syncSize        = 16
	syncEscape      = -1
)

var magic = [3]byte{'S', 'E', 'Q'}

// appendHeader appends the serialized header h to b.
func appendHeader(b []byte, h *Header) []byte {
	b = append(b, magic[:]...)
	b = append(b, h.Version)
	b = appendText(b, h.KeyClass)
	b = appendText(b, h.ValueClass)
	b = appendBool(b, h.Compression != None)
	b = appendBool(b, h.Compression == BlockCompressed)
	if h.Compression != None {
		b = appendText(b, h.Codec)
	}
	if h.Version >= metadataVersion {
		b = binary.BigEndian.AppendUint32(b, uint32(len(h.Metadata)))
		for _, m := range h.Metadata {
			b = appendText(b, m.Key)
			b = appendText(b, m.Value)
		}
	}
	return append(b, h.Sync[:]...)
}

// appendText appends s as Hadoop's Text.writeString does: a VInt length and
// the bytes.
func appendText(b []byte, s string) []byte {
	b = appendVLong(b, int64(len(s)))
	return append(b, s...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}
