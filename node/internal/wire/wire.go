// Package wire holds the pieces of spangle's length-prefixed binary
// formats (node/batchwire, node/listwire): a 4-byte magic whose last
// byte is the format's version, uvarints, and byte strings prefixed by
// their uvarint length. The cut functions decode untrusted input: they
// check every length against what is left and never panic; their errors
// wrap the caller's malformed sentinel and name the field. They build no
// string unless they fail: they run once per key.
package wire

import (
	"encoding/binary"
	"fmt"
)

// CutMagic checks that b starts with magic and returns what follows it.
// kind names the format in errors ("batch", "listing"), what the message
// ("request", "reply").
func CutMagic(b []byte, magic [4]byte, malformed error, kind, what string) ([]byte, error) {
	if len(b) < len(magic) || [3]byte(b[:3]) != [3]byte(magic[:3]) {
		// string(...): a slice of magic would make it escape, and cost an
		// allocation on every call.
		return nil, fmt.Errorf("%w: not a %s %s (no %q prefix)", malformed, kind, what, string(magic[:3]))
	}
	if b[3] != magic[3] {
		return nil, fmt.Errorf("%w: %s %s format %d, want %d", malformed, kind, what, b[3], magic[3])
	}
	return b[len(magic):], nil
}

// CutUvarint cuts a uvarint from b.
func CutUvarint(b []byte, malformed error, what string) (uint64, []byte, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, fmt.Errorf("%w: bad %s", malformed, what)
	}
	return v, b[n:], nil
}

// CutBytes cuts a length-prefixed byte string from b. The result's
// capacity is its length, so that appending to it never writes into b.
func CutBytes(b []byte, malformed error, what string) ([]byte, []byte, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 {
		return nil, nil, fmt.Errorf("%w: bad %s length", malformed, what)
	}
	rest := b[w:]
	if n > uint64(len(rest)) {
		return nil, nil, fmt.Errorf("%w: %s of %d bytes, %d left", malformed, what, n, len(rest))
	}
	return rest[:n:n], rest[n:], nil
}

// AppendBytes appends b to dst, prefixed by its length.
func AppendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// UvarintLen returns the length of v's uvarint encoding.
func UvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// BytesLen returns the length of a byte string of n bytes with its
// length prefix.
func BytesLen(n int) int { return UvarintLen(uint64(n)) + n }
