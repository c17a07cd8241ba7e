package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
)

// The cluster map is read with JetStream's batched direct gets, one
// request and reply subject per page, never with a consumer. A client's
// NATS account (docs/SECURITY.md) has no JetStream of its own: it imports
// the lookup services and the direct gets of the three KV streams from
// the cluster's account, and nothing that would let it create consumers
// there (a push consumer's deliver subject is named in the request body,
// so it could copy entries onto any subject of that account).

// pageSize is how many messages one batched direct get asks for; the
// reader asks for the next page from the sequence after the last one it
// got.
const pageSize = 1024

// maxBucketEntries bounds the keys read of one bucket (a cluster map of
// 64 pages): a bucket stuffed beyond it is not read, and the map in use
// stays as it was.
const maxBucketEntries = 64 * pageSize

// kvEntry is the last message of one key of a bucket.
type kvEntry struct {
	key   string
	value []byte
	del   bool // a delete or purge marker, or a TTL's expiry
}

// errDirectGet is a direct get's failure.
var errDirectGet = errors.New("client: direct get")

// readBucket returns the last message of every key of stream (whose
// keys are the subjects under pre, "$KV.<bucket>."), through api (the
// JetStream API prefix). It reads the stream in order of sequence, a page
// of batched direct gets (next_by_subj) at a time, and keeps each key's
// latest message: with the cluster's buckets' history of one that is
// every message once. (A multi_last request would answer only up to 1024
// keys in all: "413 Too Many Results" beyond.)
func readBucket(ctx context.Context, nc *nats.Conn, api, stream, pre string) ([]kvEntry, error) {
	subject := api + ".DIRECT.GET." + stream
	var page []kvEntry
	var out []kvEntry
	at := map[string]int{} // key → index in out
	start := uint64(1)
	for {
		req := struct {
			Seq        uint64 `json:"seq"`
			NextBySubj string `json:"next_by_subj"`
			Batch      int    `json:"batch"`
		}{start, pre + ">", pageSize}
		body, err := json.Marshal(req)
		if err != nil {
			return nil, err
		}
		page = page[:0]
		n, last, err := directGetPage(ctx, nc, subject, body, pre, &page)
		if err != nil {
			return nil, err
		}
		for _, e := range page {
			if i, ok := at[e.key]; ok {
				out[i] = e
				continue
			}
			if len(out) == maxBucketEntries {
				return nil, fmt.Errorf("%w %s: more than %d keys", errDirectGet, subject, maxBucketEntries)
			}
			at[e.key] = len(out)
			out = append(out, e)
		}
		if n < pageSize || last == 0 {
			return out, nil
		}
		start = last + 1
	}
}

// directGetPage sends one batched direct get and appends its messages to
// out until the end of batch. It returns how many messages came and the
// highest sequence among them.
func directGetPage(ctx context.Context, nc *nats.Conn, subject string, body []byte, pre string, out *[]kvEntry) (n int, last uint64, err error) {
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return 0, 0, err
	}
	defer sub.Unsubscribe() //nolint:errcheck // the connection may be closed
	if err := sub.SetPendingLimits(4*pageSize, -1); err != nil {
		return 0, 0, err
	}
	if err := nc.PublishRequest(subject, inbox, body); err != nil {
		return 0, 0, err
	}
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return n, last, fmt.Errorf("%w %s: %v", errDirectGet, subject, err)
		}
		if status := m.Header.Get("Status"); status != "" {
			switch status {
			case "204": // end of batch
				return n, last, nil
			case "404": // no key at all, or none after the page asked for
				return n, last, nil
			case "503":
				return n, last, fmt.Errorf("%w %s: %w", errDirectGet, subject, nats.ErrNoResponders)
			default:
				return n, last, fmt.Errorf("%w %s: status %s %s", errDirectGet, subject, status, m.Header.Get("Description"))
			}
		}
		n++
		seq, _ := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
		last = max(last, seq)
		key, ok := strings.CutPrefix(m.Header.Get("Nats-Subject"), pre)
		if !ok || key == "" {
			continue
		}
		op := m.Header.Get("KV-Operation")
		del := op == "DEL" || op == "PURGE" || m.Header.Get("Nats-Marker-Reason") != ""
		*out = append(*out, kvEntry{key: key, value: m.Data, del: del})
	}
}
