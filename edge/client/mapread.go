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

// multiLastPage is the most entries nats-server answers to one
// multi_last request; the reader asks for the next page from the
// sequence after the last one it got.
const multiLastPage = 1024

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
// JetStream API prefix). All pages are read up to the sequence the first
// one ended at, so the result is one state of the bucket.
func readBucket(ctx context.Context, nc *nats.Conn, api, stream, pre string) ([]kvEntry, error) {
	subject := api + ".DIRECT.GET." + stream
	var out []kvEntry
	var start, upTo uint64
	for {
		req := struct {
			MultiLast []string `json:"multi_last"`
			Batch     int      `json:"batch"`
			Seq       uint64   `json:"seq,omitempty"`
			UpToSeq   uint64   `json:"up_to_seq,omitempty"`
		}{[]string{pre + ">"}, multiLastPage, start, upTo}
		body, err := json.Marshal(req)
		if err != nil {
			return nil, err
		}
		n, last, end, err := directGetPage(ctx, nc, subject, body, pre, &out)
		if err != nil {
			return nil, err
		}
		if upTo == 0 {
			upTo = end
		}
		if n < multiLastPage || last == 0 || (upTo != 0 && last >= upTo) {
			return out, nil
		}
		start = last + 1
	}
}

// directGetPage sends one batched direct get and appends its messages to
// out until the end of batch. It returns how many messages came, the
// highest sequence among them, and the sequence the batch was read up to.
func directGetPage(ctx context.Context, nc *nats.Conn, subject string, body []byte, pre string, out *[]kvEntry) (n int, last, upTo uint64, err error) {
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return 0, 0, 0, err
	}
	defer sub.Unsubscribe() //nolint:errcheck // the connection may be closed
	if err := sub.SetPendingLimits(4*multiLastPage, -1); err != nil {
		return 0, 0, 0, err
	}
	if err := nc.PublishRequest(subject, inbox, body); err != nil {
		return 0, 0, 0, err
	}
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return n, last, upTo, fmt.Errorf("%w %s: %v", errDirectGet, subject, err)
		}
		if status := m.Header.Get("Status"); status != "" {
			switch status {
			case "204": // end of batch
				upTo, _ = strconv.ParseUint(m.Header.Get("Nats-UpTo-Sequence"), 10, 64)
				if upTo == 0 {
					upTo, _ = strconv.ParseUint(m.Header.Get("Nats-Last-Sequence"), 10, 64)
				}
				return n, last, upTo, nil
			case "404": // no key at all
				return n, last, upTo, nil
			case "503":
				return n, last, upTo, fmt.Errorf("%w %s: %w", errDirectGet, subject, nats.ErrNoResponders)
			default:
				return n, last, upTo, fmt.Errorf("%w %s: status %s %s", errDirectGet, subject, status, m.Header.Get("Description"))
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
