package node

import "github.com/cespare/xxhash/v2"

// ETagLen is the length of an entity tag: '"', 16 hex digits, '"'.
const ETagLen = 18

const hexDigits = "0123456789abcdef"

// AppendETag appends value's strong entity tag: the 64-bit xxhash of the
// bytes as 16 lower-case hex digits, quoted. It depends on the bytes only,
// so every node and every version holding the same value agree on it.
func AppendETag(dst, value []byte) []byte {
	h := xxhash.Sum64(value)
	dst = append(dst, '"')
	for shift := 60; shift >= 0; shift -= 4 {
		dst = append(dst, hexDigits[(h>>uint(shift))&0xf])
	}
	return append(dst, '"')
}

// ETag returns value's strong entity tag (AppendETag).
func ETag(value []byte) string {
	var b [ETagLen]byte
	return string(AppendETag(b[:0], value))
}
