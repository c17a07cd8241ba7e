package node

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
)

// A listing's cursor is opaque to clients and untrusted when it comes
// back: base64url (no padding) of
//
//	0x01                          cursor format
//	uvarint(len) db               the db it lists
//	uvarint(len) version          the version every page reads
//	uvarint(len) after            the last key listed: the next page starts after it
//	mac[8]                        HMAC-SHA256 of the bytes before it, truncated
//
// The MAC is keyed with Config.CursorKey (the cluster's peer token when
// there is one): a cursor is only good if a node sharing the key made it,
// so it cannot pin a version a peer request (?proxy=) would refuse. Without
// a key it catches damage, not forgery. Every length is bounded before
// anything is allocated.
const (
	cursorFormat = 1
	cursorMACLen = 8
	// maxCursorName bounds a cursor's db and version names.
	maxCursorName = 255
	// MaxListKeyLen bounds a listing's prefix, start, end and the key a
	// cursor resumes after: the longest key a version stores (bbolt's
	// limit, blocks' builds refuse longer ones).
	MaxListKeyLen = 32768
	// maxCursorLen is the longest encoded cursor decodeCursor reads.
	maxCursorLen = (1 + 3*binary.MaxVarintLen32 + 2*maxCursorName + MaxListKeyLen + cursorMACLen + 2) / 3 * 4
)

// cursorDefaultKey keys the MAC when Config.CursorKey is empty.
var cursorDefaultKey = []byte("spangle listing cursor")

// cursor is where the next page of a listing starts.
type cursor struct {
	db, version string
	after       []byte
}

// encodeCursor returns c as a client sees it.
func encodeCursor(c cursor, key []byte) string {
	b := make([]byte, 0, 1+3*binary.MaxVarintLen32+len(c.db)+len(c.version)+len(c.after)+cursorMACLen)
	b = append(b, cursorFormat)
	b = binary.AppendUvarint(b, uint64(len(c.db)))
	b = append(b, c.db...)
	b = binary.AppendUvarint(b, uint64(len(c.version)))
	b = append(b, c.version...)
	b = binary.AppendUvarint(b, uint64(len(c.after)))
	b = append(b, c.after...)
	b = append(b, cursorMAC(key, b)...)
	return cursorEncoding.EncodeToString(b)
}

var cursorEncoding = base64.RawURLEncoding.Strict()

func cursorMAC(key, b []byte) []byte {
	if len(key) == 0 {
		key = cursorDefaultKey
	}
	m := hmac.New(sha256.New, key)
	m.Write(b)
	return m.Sum(nil)[:cursorMACLen]
}

// decodeCursor parses s, a cursor from a request. Any error wraps
// ErrBadCursor: too long, not base64url, a bad MAC, another format,
// lengths out of bounds, trailing bytes.
func decodeCursor(s string, key []byte) (cursor, error) {
	if len(s) > maxCursorLen {
		return cursor{}, fmt.Errorf("%w: %d bytes, over %d", ErrBadCursor, len(s), maxCursorLen)
	}
	// Strict: one spelling per cursor (non-zero trailing bits refused).
	b, err := cursorEncoding.DecodeString(s)
	if err != nil {
		return cursor{}, fmt.Errorf("%w: not base64url", ErrBadCursor)
	}
	if len(b) < 1+cursorMACLen {
		return cursor{}, fmt.Errorf("%w: %d bytes", ErrBadCursor, len(b))
	}
	body, mac := b[:len(b)-cursorMACLen], b[len(b)-cursorMACLen:]
	if !hmac.Equal(mac, cursorMAC(key, body)) {
		return cursor{}, fmt.Errorf("%w: not made by this cluster, or damaged", ErrBadCursor)
	}
	if body[0] != cursorFormat {
		return cursor{}, fmt.Errorf("%w: format %d", ErrBadCursor, body[0])
	}
	rest := body[1:]
	cut := func(what string, limit int) ([]byte, error) {
		n, m := binary.Uvarint(rest)
		if m <= 0 || n > uint64(limit) || n > uint64(len(rest)-m) {
			return nil, fmt.Errorf("%w: bad %s length", ErrBadCursor, what)
		}
		f := rest[m : m+int(n)]
		rest = rest[m+int(n):]
		return f, nil
	}
	db, err := cut("db", maxCursorName)
	if err != nil {
		return cursor{}, err
	}
	version, err := cut("version", maxCursorName)
	if err != nil {
		return cursor{}, err
	}
	after, err := cut("key", MaxListKeyLen)
	if err != nil {
		return cursor{}, err
	}
	switch {
	case len(rest) > 0:
		return cursor{}, fmt.Errorf("%w: %d trailing bytes", ErrBadCursor, len(rest))
	case len(db) == 0 || len(version) == 0:
		return cursor{}, fmt.Errorf("%w: no db or version", ErrBadCursor)
	}
	return cursor{db: string(db), version: string(version), after: after}, nil
}
