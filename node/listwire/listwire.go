package listwire

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/spangledb/spangle/node/internal/wire"
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
	dst = wire.AppendBytes(dst, r.Prefix)
	dst = wire.AppendBytes(dst, r.Start)
	dst = wire.AppendBytes(dst, r.End)
	return wire.AppendBytes(dst, []byte(r.Cursor))
}

// DecodeRequest decodes a request. Prefix, start, end and the cursor
// longer than maxLen bytes are malformed, as are a limit over 1<<31 and
// trailing bytes. The slices alias b.
func DecodeRequest(b []byte, maxLen int) (Request, error) {
	rest, err := wire.CutMagic(b, requestMagic, ErrMalformed, "listing", "request")
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
	limit, rest, err := wire.CutUvarint(rest[1:], ErrMalformed, "limit")
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
		if *f.dst, rest, err = wire.CutBytes(rest, ErrMalformed, f.what); err != nil {
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
	n := len(replyMagic) + 1 + wire.BytesLen(len(r.Version)) + wire.BytesLen(len(r.ContentType)) +
		wire.UvarintLen(uint64(len(r.Keys))) + wire.BytesLen(len(r.Cursor))
	for i, k := range r.Keys {
		n += wire.BytesLen(len(k))
		if r.HasValues {
			n += wire.BytesLen(len(r.Values[i]))
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
	dst = wire.AppendBytes(dst, []byte(r.Version))
	dst = wire.AppendBytes(dst, []byte(r.ContentType))
	dst = binary.AppendUvarint(dst, uint64(len(r.Keys)))
	for i, k := range r.Keys {
		dst = wire.AppendBytes(dst, k)
		if r.HasValues {
			dst = wire.AppendBytes(dst, r.Values[i])
		}
	}
	return wire.AppendBytes(dst, []byte(r.Cursor))
}

// DecodeReply decodes a reply of at most maxKeys keys. The keys and
// values alias b.
func DecodeReply(b []byte, maxKeys int) (Reply, error) {
	rest, err := wire.CutMagic(b, replyMagic, ErrMalformed, "listing", "reply")
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
	if version, rest, err = wire.CutBytes(rest[1:], ErrMalformed, "version"); err != nil {
		return Reply{}, err
	}
	if ctype, rest, err = wire.CutBytes(rest, ErrMalformed, "content type"); err != nil {
		return Reply{}, err
	}
	count, rest, err := wire.CutUvarint(rest, ErrMalformed, "count")
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
		if r.Keys[i], rest, err = wire.CutBytes(rest, ErrMalformed, "key"); err != nil {
			return Reply{}, fmt.Errorf("%w (key %d)", err, i)
		}
		if r.HasValues {
			if r.Values[i], rest, err = wire.CutBytes(rest, ErrMalformed, "value"); err != nil {
				return Reply{}, fmt.Errorf("%w (key %d)", err, i)
			}
		}
	}
	cur, rest, err := wire.CutBytes(rest, ErrMalformed, "cursor")
	if err != nil {
		return Reply{}, err
	}
	if len(rest) > 0 {
		return Reply{}, fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(rest))
	}
	r.Version, r.ContentType, r.Cursor = string(version), string(ctype), string(cur)
	return r, nil
}
