package node

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// TestCursor: a cursor decodes to what was encoded, with the key it was
// made with only; garbage, a changed byte, a truncation, a cursor made
// with another key and an oversized one are ErrBadCursor.
func TestCursor(t *testing.T) {
	key := []byte("peer-token")
	for _, c := range []cursor{
		{db: "db", version: "v1", after: []byte("a")},
		{db: "d", version: "20261126", after: []byte{0, 0xff, '/', '%'}},
		{db: "db", version: "v1", after: bytes.Repeat([]byte{0xfe}, MaxListKeyLen)},
	} {
		s := encodeCursor(c, key)
		got, err := decodeCursor(s, key)
		if err != nil || got.db != c.db || got.version != c.version || !bytes.Equal(got.after, c.after) {
			t.Fatalf("decode(encode(%q, %q, %.20q)) = %+v, %v", c.db, c.version, c.after, got, err)
		}
		if _, err := decodeCursor(s, []byte("other")); !errors.Is(err, ErrBadCursor) {
			t.Errorf("a cursor of another key = %v, want ErrBadCursor", err)
		}
		if _, err := decodeCursor(s, nil); !errors.Is(err, ErrBadCursor) {
			t.Errorf("a keyed cursor checked without the key = %v, want ErrBadCursor", err)
		}
		raw, _ := base64.RawURLEncoding.DecodeString(s)
		for i := range raw {
			bad := bytes.Clone(raw)
			bad[i] ^= 1
			if _, err := decodeCursor(base64.RawURLEncoding.EncodeToString(bad), key); !errors.Is(err, ErrBadCursor) {
				t.Fatalf("byte %d changed: %v, want ErrBadCursor", i, err)
			}
			if i%97 == 0 {
				if _, err := decodeCursor(base64.RawURLEncoding.EncodeToString(raw[:i]), key); !errors.Is(err, ErrBadCursor) {
					t.Fatalf("truncated to %d bytes: %v, want ErrBadCursor", i, err)
				}
			}
		}
	}
	for _, s := range []string{"", "x", "not a cursor!", "AAAA", strings.Repeat("A", maxCursorLen+1)} {
		if _, err := decodeCursor(s, key); !errors.Is(err, ErrBadCursor) {
			t.Errorf("decodeCursor(%.20q) = %v, want ErrBadCursor", s, err)
		}
	}
	// Without a key, the default one: made and checked alike.
	s := encodeCursor(cursor{db: "db", version: "v", after: []byte("k")}, nil)
	if _, err := decodeCursor(s, nil); err != nil {
		t.Errorf("an unkeyed cursor: %v", err)
	}
}

// FuzzDecodeCursor: whatever a client sends as a cursor, decodeCursor
// returns ErrBadCursor or a cursor within bounds, never panics, and what
// it accepts encodes back to the same string.
func FuzzDecodeCursor(f *testing.F) {
	f.Add(encodeCursor(cursor{db: "db", version: "v1", after: []byte("key")}, nil))
	f.Add(encodeCursor(cursor{db: "d", version: "v", after: []byte{0, 0xff}}, nil))
	f.Add("")
	f.Add("AQJkYgJ2MQNrZXk")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := decodeCursor(s, nil)
		if err != nil {
			if !errors.Is(err, ErrBadCursor) {
				t.Fatalf("decodeCursor = %v, want ErrBadCursor", err)
			}
			return
		}
		if len(c.db) == 0 || len(c.db) > maxCursorName || len(c.version) == 0 || len(c.version) > maxCursorName || len(c.after) > MaxListKeyLen {
			t.Fatalf("a cursor out of bounds: db %d, version %d, key %d bytes", len(c.db), len(c.version), len(c.after))
		}
		if again := encodeCursor(c, nil); again != s {
			t.Fatalf("encode(decode(%q)) = %q", s, again)
		}
	})
}
