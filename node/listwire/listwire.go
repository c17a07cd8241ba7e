package listwire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ContentType is the media type of requests and replies.
const ContentType = "application/x-spangle-list"

// FormatVersion is the format version this package writes and reads.
const FormatVersion = 1

var (
	requestMagic = [4]byte{'S', 'L', 'Q', FormatVersion}
	replyMagic   = [4]byte{'S', 'L', 'R', FormatVersion}
)

// ErrMalformed: the bytes are not a request (or reply) of this format.
var ErrMalformed = errors.New("listwire: malformed listing")

const (
	flagValues = 1 << 0
	flagMore   = 1 << 1
)

// Request asks for a page of a db's keys.
type Request struct {
	Prefix, Start, End []byte // End empty: unbounded
	// Limit is the most keys of the page; 0: the server's maximum.
	Limit  int
	Values bool
	Cursor string // "" for the first page
}

// Reply is a page.
type Reply struct {
	Version     string
	ContentType string // of the values; "" means application/octet-stream
	// Keys in order; Values theirs when the request asked for values
	// (then as many as Keys), else nil.
	Keys, Values [][]byte
	HasValues    bool // the page carries values
	More         bool // keys follow the last one
	Cursor       string
}

// AppendRequest appends r's encoding to dst.
func AppendRequest(dst []byte, r Request) []byte {
	dst = append(dst, requestMagic[:]...)
	var flags byte
	if r.Values {
		flags |= flagValues
	}
	dst = append(dst, flags)
	dst = binary.AppendUvarint(dst, uint64(max(r.Limit, 0)))
	dst = appendBytes(dst, r.Prefix)
	dst = appendBytes(dst, r.Start)
	dst = appendBytes(dst, r.End)
	return appendBytes(dst, []byte(r.Cursor))
}

// DecodeRequest decodes a request. Prefix, start, end and the cursor
// longer than maxLen bytes are malformed, as are a limit over 1<<31 and
// trailing bytes. The slices alias b.
func DecodeRequest(b []byte, maxLen int) (Request, error) {
	rest, err := cutMagic(b, requestMagic, "request")
	if err != nil {
		return Request{}, err
	}
	if len(rest) < 1 {
		return Request{}, fmt.Errorf("%w: no flags", ErrMalformed)
	}
	var r Request
	flags := rest[0]
	if flags&^flagValues != 0 {
		return Request{}, fmt.Errorf("%w: unknown request flags %#x", ErrMalformed, flags)
	}
	r.Values = flags&flagValues != 0
	limit, rest, err := cutUvarint(rest[1:], "limit")
	if err != nil {
		return Request{}, err
	}
	if limit > 1<<31 {
		return Request{}, fmt.Errorf("%w: limit %d", ErrMalformed, limit)
	}
	r.Limit = int(limit)
	var cur []byte
	for _, f := range []struct {
		dst  *[]byte
		what string
	}{{&r.Prefix, "prefix"}, {&r.Start, "start"}, {&r.End, "end"}, {&cur, "cursor"}} {
		if *f.dst, rest, err = cutBytes(rest, f.what); err != nil {
			return Request{}, err
		}
		if len(*f.dst) > maxLen {
			return Request{}, fmt.Errorf("%w: a %s of %d bytes, over %d", ErrMalformed, f.what, len(*f.dst), maxLen)
		}
	}
	if len(rest) > 0 {
		return Request{}, fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(rest))
	}
	r.Cursor = string(cur)
	return r, nil
}

// ReplySize returns the encoded size of r.
func ReplySize(r Reply) int {
	n := len(replyMagic) + 1 + bytesLen(len(r.Version)) + bytesLen(len(r.ContentType)) +
		uvarintLen(uint64(len(r.Keys))) + bytesLen(len(r.Cursor))
	for i, k := range r.Keys {
		n += bytesLen(len(k))
		if r.HasValues {
			n += bytesLen(len(r.Values[i]))
		}
	}
	return n
}

// AppendReply appends r's encoding to dst. With r.HasValues, r.Values
// must be as long as r.Keys.
func AppendReply(dst []byte, r Reply) []byte {
	dst = append(dst, replyMagic[:]...)
	var flags byte
	if r.HasValues {
		flags |= flagValues
	}
	if r.More {
		flags |= flagMore
	}
	dst = append(dst, flags)
	dst = appendBytes(dst, []byte(r.Version))
	dst = appendBytes(dst, []byte(r.ContentType))
	dst = binary.AppendUvarint(dst, uint64(len(r.Keys)))
	for i, k := range r.Keys {
		dst = appendBytes(dst, k)
		if r.HasValues {
			dst = appendBytes(dst, r.Values[i])
		}
	}
	return appendBytes(dst, []byte(r.Cursor))
}

// DecodeReply decodes a reply of at most maxKeys keys. The keys and
// values alias b.
func DecodeReply(b []byte, maxKeys int) (Reply, error) {
	rest, err := cutMagic(b, replyMagic, "reply")
	if err != nil {
		return Reply{}, err
	}
	if len(rest) < 1 {
		return Reply{}, fmt.Errorf("%w: no flags", ErrMalformed)
	}
	flags := rest[0]
	if flags&^(flagValues|flagMore) != 0 {
		return Reply{}, fmt.Errorf("%w: unknown reply flags %#x", ErrMalformed, flags)
	}
	r := Reply{HasValues: flags&flagValues != 0, More: flags&flagMore != 0}
	var version, ctype []byte
	if version, rest, err = cutBytes(rest[1:], "version"); err != nil {
		return Reply{}, err
	}
	if ctype, rest, err = cutBytes(rest, "content type"); err != nil {
		return Reply{}, err
	}
	count, rest, err := cutUvarint(rest, "count")
	if err != nil {
		return Reply{}, err
	}
	per := uint64(1)
	if r.HasValues {
		per = 2
	}
	if count > uint64(maxKeys) || count*per > uint64(len(rest)) {
		return Reply{}, fmt.Errorf("%w: %d keys (at most %d, %d bytes left)", ErrMalformed, count, maxKeys, len(rest))
	}
	r.Keys = make([][]byte, count)
	if r.HasValues {
		r.Values = make([][]byte, count)
	}
	for i := range r.Keys {
		if r.Keys[i], rest, err = cutBytes(rest, "key"); err != nil {
			return Reply{}, fmt.Errorf("%w (key %d)", err, i)
		}
		if r.HasValues {
			if r.Values[i], rest, err = cutBytes(rest, "value"); err != nil {
				return Reply{}, fmt.Errorf("%w (key %d)", err, i)
			}
		}
	}
	cur, rest, err := cutBytes(rest, "cursor")
	if err != nil {
		return Reply{}, err
	}
	if len(rest) > 0 {
		return Reply{}, fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(rest))
	}
	r.Version, r.ContentType, r.Cursor = string(version), string(ctype), string(cur)
	return r, nil
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func cutMagic(b []byte, magic [4]byte, what string) ([]byte, error) {
	if len(b) < len(magic) || [3]byte(b[:3]) != [3]byte(magic[:3]) {
		return nil, fmt.Errorf("%w: not a listing %s (no %q prefix)", ErrMalformed, what, string(magic[:3]))
	}
	if b[3] != magic[3] {
		return nil, fmt.Errorf("%w: listing %s format %d, want %d", ErrMalformed, what, b[3], magic[3])
	}
	return b[len(magic):], nil
}

func cutUvarint(b []byte, what string) (uint64, []byte, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, fmt.Errorf("%w: bad %s", ErrMalformed, what)
	}
	return v, b[n:], nil
}

// cutBytes cuts a length-prefixed byte string; the result's capacity is
// its length.
func cutBytes(b []byte, what string) ([]byte, []byte, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 {
		return nil, nil, fmt.Errorf("%w: bad %s length", ErrMalformed, what)
	}
	rest := b[w:]
	if n > uint64(len(rest)) {
		return nil, nil, fmt.Errorf("%w: %s of %d bytes, %d left", ErrMalformed, what, n, len(rest))
	}
	return rest[:n:n], rest[n:], nil
}

func bytesLen(n int) int { return uvarintLen(uint64(n)) + n }

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
