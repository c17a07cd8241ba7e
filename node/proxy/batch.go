package proxy

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/spangledb/spangle/node/batchwire"
)

// The batch wire format of edge/BATCH.md, the part a proxy speaks: it
// writes requests and reads replies, with node/batchwire (the one codec
// of clients, nodes and peers).

// batchContentType is the media type of batch requests and replies.
const batchContentType = batchwire.ContentType

// errMalformed: a batch reply that does not parse.
var errMalformed = batchwire.ErrMalformed

// errItem: a batch reply's item that says its key could not be looked up.
var errItem = errors.New("proxy: peer failed the key in a batch")

// appendBatchRequest appends the batch request for the attempts' keys.
func appendBatchRequest(b []byte, attempts []*attempt) []byte {
	b = batchwire.AppendRequestHeader(b, len(attempts))
	for _, a := range attempts {
		b = batchwire.AppendKey(b, a.f.req.Key)
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
	v, ct, count, rest, err := batchwire.CutReplyHeader(b)
	if err != nil {
		return nil, err
	}
	if string(v) != version {
		return nil, fmt.Errorf("%w: peer %s sent version %q for %q", errVersion, peer, v, version)
	}
	if count != n {
		return nil, fmt.Errorf("%w: %d items for %d keys", errMalformed, count, n)
	}
	contentType := string(ct)
	start := len(dst)
	items := slices.Grow(dst, n)[:start+n]
	clear(items[start:])
	for i := start; i < len(items); i++ {
		var wire batchwire.Item
		if wire, rest, err = batchwire.CutItem(rest, i-start); err != nil {
			return nil, err
		}
		it := &items[i]
		switch {
		case wire.Status == batchwire.Missing:
			it.res = Response{Status: 404, Version: version, ContentType: contentType, Peer: peer}
		case wire.Status == batchwire.Failed:
			it.err = fmt.Errorf("%w: peer %s: %q", errItem, peer, wire.Value)
		case int64(len(wire.Value)) > maxBody:
			it.err = fmt.Errorf("%w: %d bytes, limit %d", ErrBodyTooLarge, len(wire.Value), maxBody)
		default:
			it.res = Response{Status: 200, Body: append([]byte(nil), wire.Value...), Version: version, ContentType: contentType, Peer: peer}
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
