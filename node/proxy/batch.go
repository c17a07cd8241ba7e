package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// The batch wire format of edge/BATCH.md, the part a proxy speaks: it
// writes requests and reads replies. (edge/internal/batchwire is edge's
// own and out of reach; the worked example of BATCH.md is checked in
// batch_test.go.)

// batchContentType is the media type of batch requests and replies.
const batchContentType = "application/x-spangle-batch"

var (
	batchRequestMagic = [4]byte{'S', 'B', 'Q', 1}
	batchReplyMagic   = [4]byte{'S', 'B', 'R', 1}
)

// Item statuses of a batch reply.
const (
	itemMissing byte = 0x00
	itemFound   byte = 0x01
	itemFailed  byte = 0x02
)

// errMalformed: a batch reply that does not parse.
var errMalformed = errors.New("proxy: malformed batch reply")

// errItem: a batch reply's item that says its key could not be looked up.
var errItem = errors.New("proxy: peer failed the key in a batch")

// appendBatchRequest appends the batch request for the attempts' keys.
func appendBatchRequest(b []byte, attempts []*attempt) []byte {
	b = append(b, batchRequestMagic[:]...)
	b = binary.AppendUvarint(b, uint64(len(attempts)))
	for _, a := range attempts {
		b = binary.AppendUvarint(b, uint64(len(a.f.req.Key)))
		b = append(b, a.f.req.Key...)
	}
	return b
}

// batchItem is one answer of a batch reply: a Response, or the error
// that fails its attempt.
type batchItem struct {
	res Response
	err error
}

// decodeBatchReply decodes a reply to a batch of n keys asked of peer for
// version, appending its n items to dst (whose array it reuses when large
// enough; nil is fine). Each found value is copied out of b into its own
// slice; a value over maxBody fails its item with ErrBodyTooLarge. A
// reply from another version fails with errVersion, one that does not
// parse with errMalformed.
func decodeBatchReply(dst []batchItem, b []byte, n int, peer, version string, maxBody int64) ([]batchItem, error) {
	if len(b) < 4 || [4]byte(b[:4]) != batchReplyMagic {
		return nil, fmt.Errorf("%w: no %q format 1 prefix", errMalformed, batchReplyMagic[:3])
	}
	rest := b[4:]
	v, rest, err := cutBytes(rest, "version")
	if err != nil {
		return nil, err
	}
	if string(v) != version {
		return nil, fmt.Errorf("%w: peer %s sent version %q for %q", errVersion, peer, v, version)
	}
	ct, rest, err := cutBytes(rest, "content type")
	if err != nil {
		return nil, err
	}
	count, rest, err := cutUvarint(rest, "item count")
	if err != nil {
		return nil, err
	}
	if count != uint64(n) {
		return nil, fmt.Errorf("%w: %d items for %d keys", errMalformed, count, n)
	}
	contentType := string(ct)
	start := len(dst)
	items := slices.Grow(dst, n)[:start+n]
	clear(items[start:])
	for i := start; i < len(items); i++ {
		if len(rest) == 0 {
			return nil, fmt.Errorf("%w: reply ends at item %d", errMalformed, i-start)
		}
		st := rest[0]
		rest = rest[1:]
		it := &items[i]
		switch st {
		case itemMissing:
			it.res = Response{Status: 404, Version: version, ContentType: contentType, Peer: peer}
			continue
		case itemFound, itemFailed:
		default:
			return nil, fmt.Errorf("%w: item %d has status %#x", errMalformed, i-start, st)
		}
		var val []byte
		if val, rest, err = cutBytes(rest, "item"); err != nil {
			return nil, err
		}
		switch {
		case st == itemFailed:
			it.err = fmt.Errorf("%w: peer %s: %q", errItem, peer, val)
		case int64(len(val)) > maxBody:
			it.err = fmt.Errorf("%w: %d bytes, limit %d", ErrBodyTooLarge, len(val), maxBody)
		default:
			it.res = Response{Status: 200, Body: append([]byte(nil), val...), Version: version, ContentType: contentType, Peer: peer}
		}
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last item", errMalformed, len(rest))
	}
	return items, nil
}

// batchItemBufs holds the slices batch replies are decoded into, from
// one request's decoding to the last report of its answers.
var batchItemBufs = sync.Pool{New: func() any { return new([]batchItem) }}

// maxPooledItems is the largest slice batchItemBufs keeps.
const maxPooledItems = 1024

// putBatchItems returns items to batchItemBufs through ip, cleared: they
// hold the values, which belong to the flights now.
func putBatchItems(ip *[]batchItem, items []batchItem) {
	if cap(items) > maxPooledItems {
		return
	}
	clear(items)
	*ip = items[:0]
	batchItemBufs.Put(ip)
}

// cutUvarint splits a uvarint off b.
func cutUvarint(b []byte, what string) (uint64, []byte, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, fmt.Errorf("%w: bad %s", errMalformed, what)
	}
	return v, b[n:], nil
}

// cutBytes splits a length-prefixed byte string off b; the result
// aliases b.
func cutBytes(b []byte, what string) ([]byte, []byte, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 {
		return nil, nil, fmt.Errorf("%w: bad %s length", errMalformed, what)
	}
	rest := b[w:]
	if n > uint64(len(rest)) {
		return nil, nil, fmt.Errorf("%w: %s of %d bytes, %d left", errMalformed, what, n, len(rest))
	}
	return rest[:n], rest[n:], nil
}
