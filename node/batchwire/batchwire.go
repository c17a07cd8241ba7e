package batchwire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/spangledb/spangle/node/internal/wire"
)

// ContentType is the media type of requests and replies.
const ContentType = "application/x-spangle-batch"

// FormatVersion is the format version this package writes and reads.
const FormatVersion = 1

var (
	requestMagic = [4]byte{'S', 'B', 'Q', FormatVersion}
	replyMagic   = [4]byte{'S', 'B', 'R', FormatVersion}
)

// Errors of the decoders, wrapped with details.
var (
	// ErrMalformed: the bytes are not a request (or reply) of this format.
	ErrMalformed = errors.New("batchwire: malformed batch")
	// ErrTooManyKeys: the request names more keys than allowed.
	ErrTooManyKeys = errors.New("batchwire: too many keys in batch")
)

// Status is how a reply answers one key.
type Status byte

const (
	// Missing: the key is not in the version. No bytes follow.
	Missing Status = 0
	// Found: the key's value follows.
	Found Status = 1
	// Failed: the key could not be looked up; a message follows.
	Failed Status = 2
)

// Item is one key's answer in a reply.
type Item struct {
	Status Status
	// Value is the value when Found, the message when Failed, nil when
	// Missing. Decoded items alias the reply's bytes.
	Value []byte
}

// Reply is a decoded reply.
type Reply struct {
	Version     string
	ContentType string // of the values; "" means application/octet-stream
	Items       []Item // one per requested key, in request order
}

// RequestSize returns the encoded size of a request for keys.
func RequestSize(keys [][]byte) int {
	n := len(requestMagic) + wire.UvarintLen(uint64(len(keys)))
	for _, k := range keys {
		n += wire.UvarintLen(uint64(len(k))) + len(k)
	}
	return n
}

// AppendRequest appends a request for keys to dst and returns the
// extended slice.
func AppendRequest(dst []byte, keys [][]byte) []byte {
	dst = AppendRequestHeader(dst, len(keys))
	for _, k := range keys {
		dst = AppendKey(dst, k)
	}
	return dst
}

// AppendRequestHeader appends the header of a request for count keys;
// count keys must follow (AppendKey).
func AppendRequestHeader(dst []byte, count int) []byte {
	dst = append(dst, requestMagic[:]...)
	return binary.AppendUvarint(dst, uint64(count))
}

// AppendKey appends one key of a request.
func AppendKey(dst, key []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	return append(dst, key...)
}

// DecodeRequest decodes a request naming at most maxKeys keys (maxKeys <= 0:
// no limit). The keys alias b.
func DecodeRequest(b []byte, maxKeys int) ([][]byte, error) {
	return AppendRequestKeys(nil, b, maxKeys)
}

// AppendRequestKeys is DecodeRequest appending the keys to dst, whose
// array it reuses when large enough: a caller that decodes many
// requests can keep one slice. The keys alias b; on error, dst's
// contents past its length are unspecified.
func AppendRequestKeys(dst [][]byte, b []byte, maxKeys int) ([][]byte, error) {
	rest, err := wire.CutMagic(b, requestMagic, ErrMalformed, "batch", "request")
	if err != nil {
		return nil, err
	}
	count, rest, err := wire.CutUvarint(rest, ErrMalformed, "key count")
	if err != nil {
		return nil, err
	}
	if maxKeys > 0 && count > uint64(maxKeys) {
		return nil, fmt.Errorf("%w: %d keys, at most %d allowed", ErrTooManyKeys, count, maxKeys)
	}
	if count > uint64(len(rest)) { // every key takes at least its length byte
		return nil, fmt.Errorf("%w: %d keys in %d bytes", ErrMalformed, count, len(rest))
	}
	keys := slices.Grow(dst, int(count))
	for i := range int(count) {
		var k []byte
		if k, rest, err = wire.CutBytes(rest, ErrMalformed, "key"); err != nil {
			return nil, fmt.Errorf("%w (key %d)", err, i)
		}
		keys = append(keys, k)
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last key", ErrMalformed, len(rest))
	}
	return keys, nil
}

// ReplyHeaderSize returns the encoded size of a reply's header.
func ReplyHeaderSize(version, contentType string, count int) int {
	return len(replyMagic) + wire.UvarintLen(uint64(len(version))) + len(version) +
		wire.UvarintLen(uint64(len(contentType))) + len(contentType) + wire.UvarintLen(uint64(count))
}

// ItemSize returns the encoded size of an item with status s and n bytes.
func ItemSize(s Status, n int) int {
	if s == Missing {
		return 1
	}
	return 1 + wire.UvarintLen(uint64(n)) + n
}

// AppendReplyHeader appends the header of a reply answering count keys
// from version; count items must follow (AppendItem).
func AppendReplyHeader(dst []byte, version, contentType string, count int) []byte {
	dst = append(dst, replyMagic[:]...)
	dst = binary.AppendUvarint(dst, uint64(len(version)))
	dst = append(dst, version...)
	dst = binary.AppendUvarint(dst, uint64(len(contentType)))
	dst = append(dst, contentType...)
	return binary.AppendUvarint(dst, uint64(count))
}

// AppendItem appends one key's answer: s, then for Found and Failed the
// length of b and b.
func AppendItem(dst []byte, s Status, b []byte) []byte {
	dst = append(dst, byte(s))
	if s == Missing {
		return dst
	}
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// AppendReply appends a whole reply.
func AppendReply(dst []byte, r Reply) []byte {
	dst = AppendReplyHeader(dst, r.Version, r.ContentType, len(r.Items))
	for _, it := range r.Items {
		dst = AppendItem(dst, it.Status, it.Value)
	}
	return dst
}

// DecodeReply decodes a reply holding at most maxItems items (maxItems
// <= 0: no limit). Values alias b.
func DecodeReply(b []byte, maxItems int) (Reply, error) {
	version, contentType, count, rest, err := CutReplyHeader(b)
	if err != nil {
		return Reply{}, err
	}
	if maxItems > 0 && count > maxItems {
		return Reply{}, fmt.Errorf("%w: %d items, at most %d expected", ErrMalformed, count, maxItems)
	}
	r := Reply{Version: string(version), ContentType: string(contentType), Items: make([]Item, count)}
	for i := range r.Items {
		if r.Items[i], rest, err = CutItem(rest, i); err != nil {
			return Reply{}, err
		}
	}
	if len(rest) != 0 {
		return Reply{}, fmt.Errorf("%w: %d bytes after the last item", ErrMalformed, len(rest))
	}
	return r, nil
}

// CutReplyHeader cuts a reply's header off b: its version, the values'
// content type and the item count, all aliasing b, and the items (rest).
// A count larger than the bytes left could hold is malformed.
func CutReplyHeader(b []byte) (version, contentType []byte, count int, rest []byte, err error) {
	if rest, err = wire.CutMagic(b, replyMagic, ErrMalformed, "batch", "reply"); err != nil {
		return nil, nil, 0, nil, err
	}
	if version, rest, err = wire.CutBytes(rest, ErrMalformed, "version"); err != nil {
		return nil, nil, 0, nil, err
	}
	if contentType, rest, err = wire.CutBytes(rest, ErrMalformed, "content type"); err != nil {
		return nil, nil, 0, nil, err
	}
	n, rest, err := wire.CutUvarint(rest, ErrMalformed, "item count")
	if err != nil {
		return nil, nil, 0, nil, err
	}
	if n > uint64(len(rest)) { // every item takes at least its status byte
		return nil, nil, 0, nil, fmt.Errorf("%w: %d items in %d bytes", ErrMalformed, n, len(rest))
	}
	return version, contentType, int(n), rest, nil
}

// CutItem cuts item i (for errors) off rest: its status and bytes (the
// value, or a failure's message), aliasing rest.
func CutItem(rest []byte, i int) (Item, []byte, error) {
	if len(rest) == 0 {
		return Item{}, nil, fmt.Errorf("%w: reply ends at item %d", ErrMalformed, i)
	}
	it := Item{Status: Status(rest[0])}
	rest = rest[1:]
	switch it.Status {
	case Missing:
		return it, rest, nil
	case Found, Failed:
		var err error
		if it.Value, rest, err = wire.CutBytes(rest, ErrMalformed, "value"); err != nil {
			return Item{}, nil, fmt.Errorf("%w (item %d)", err, i)
		}
		return it, rest, nil
	}
	return Item{}, nil, fmt.Errorf("%w: item %d has status %#x", ErrMalformed, i, byte(it.Status))
}
