package edge

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spangledb/spangle/edge/internal/natswire"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/listwire"
)

// onList answers a key listing on spangle.<cluster>.list.<db>: a
// listwire request, a listwire reply bounded by the server's max_payload
// (the page stops before a key or value that would pass it), headers
// Spangle-Status and Spangle-Version as for mget. A backend without
// listings answers 501.
func (s *NATSServer) onList(m *nats.Msg) {
	if !s.replyAllowed(m, s.met.list) {
		return
	}
	defer s.recoverNATS(s.ctx, m, s.met.list)
	start := time.Now()
	db := strings.TrimPrefix(m.Subject, s.listPrefix)
	status := s.list(m, db)
	s.met.list.observe(status, time.Since(start))
}

// listReplyOverhead is room left in max_payload for a reply's framing
// beyond its keys and values: magic, flags, version, content type, count,
// cursor, and a length per key and value.
const listReplyOverhead = 1 << 10

func (s *NATSServer) list(m *nats.Msg, db string) int {
	be := s.lister
	if be == nil {
		return s.answerError(m, s.met.list, db, "", fmt.Errorf("%w: key listings are not supported here", errNotSupported))
	}
	req, err := listwire.DecodeRequest(m.Data, node.MaxListKeyLen+maxCursorChars)
	if err != nil {
		return s.answerError(m, s.met.list, db, "", err)
	}
	limit := req.Limit
	switch {
	case limit == 0:
		limit = s.cfg.MaxListKeys
	case limit > s.cfg.MaxListKeys:
		return s.answerError(m, s.met.list, db, "", fmt.Errorf("%w: limit %d over %d (max_list_keys)", node.ErrBadListing, limit, s.cfg.MaxListKeys))
	}
	// Each key and value costs up to 2×MaxVarintLen32 of framing.
	payload := int(s.nc.MaxPayload())
	budget := payload - listReplyOverhead - 10*limit
	if budget <= 0 {
		return s.answerError(m, s.met.list, db, "", fmt.Errorf("%w: a page of %d keys leaves no room in max_payload %d; ask for fewer", errTooLarge, limit, payload))
	}
	page, err := be.List(s.ctx, db, node.ListOptions{Prefix: req.Prefix, Start: req.Start, End: req.End, Limit: limit,
		MaxBytes: budget, Values: req.Values, Raw: rawRequest(m), Cursor: req.Cursor})
	if err != nil {
		return s.answerError(m, s.met.list, db, "", err)
	}
	s.noteKeys(m, len(page.Keys))
	reply := listwire.Reply{Version: page.Version, ContentType: page.ContentType, Keys: page.Keys, Values: page.Values,
		HasValues: req.Values, More: page.More, Cursor: page.Cursor}
	data := listwire.AppendReply(make([]byte, 0, listwire.ReplySize(reply)), reply)
	h := nats.Header{
		natswire.HeaderStatus:      []string{statusText(http.StatusOK)},
		natswire.HeaderVersion:     []string{page.Version},
		natswire.HeaderContentType: valListwire,
	}
	return s.send(m, h, data, page.Version, http.StatusOK)
}

// maxCursorChars bounds a request's cursor as the node does (longer is
// malformed here already).
const maxCursorChars = 48 << 10
