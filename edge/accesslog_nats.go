package edge

import (
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spangledb/spangle/node/batchwire"
)

// The NATS door's access log (NATSConfig.AccessLog): a line per request
// answered, with its subject (in the path field), the keys it asked
// (get and part: 1; mget: its batch's; list: the page's), the status
// and version answered, the reply's bytes and the duration. A handler
// runs inside logged, which keeps the request's record in natsRecords
// (keyed by the message) for send and the list handler to fill.

// natsLogRecord is one NATS request's record while it is answered.
type natsLogRecord struct {
	rec accessRecord
}

var natsLogRecords = sync.Pool{New: func() any { return new(natsLogRecord) }}

// logged returns h with every request logged when the door has an
// access log (db: the db of h's subjects, "" when the subject names it
// after the get, mget or list prefix); h itself otherwise.
func (s *NATSServer) logged(db string, h nats.MsgHandler) nats.MsgHandler {
	l := s.cfg.AccessLog
	if l == nil {
		return h
	}
	return func(m *nats.Msg) {
		lr := natsLogRecords.Get().(*natsLogRecord)
		lr.rec.start, lr.rec.db = time.Now(), db
		s.inflight.Store(m, lr)
		defer func() {
			s.inflight.Delete(m)
			rec := &lr.rec
			rec.elapsed = time.Since(rec.start)
			rec.target, rec.proto = m.Subject, "NATS"
			if rec.db == "" {
				rec.db = s.subjectDB(m.Subject)
			}
			if rec.keys == 0 {
				rec.keys = natsKeys(m, s.mgetPrefix)
			}
			l.write(rec)
			*lr = natsLogRecord{}
			natsLogRecords.Put(lr)
		}()
		h(m)
	}
}

// subjectDB is the db a get, mget or list subject names ("" for a part
// subject, whose handler notes it).
func (s *NATSServer) subjectDB(subject string) string {
	for _, p := range []string{s.getPrefix, s.mgetPrefix, s.listPrefix} {
		if db, ok := strings.CutPrefix(subject, p); ok {
			return db
		}
	}
	return ""
}

// natsKeys is the keys a get, part or mget request asks: a batch's
// count, read from its header (0 when it has none).
func natsKeys(m *nats.Msg, mgetPrefix string) int {
	if !strings.HasPrefix(m.Subject, mgetPrefix) {
		return 1
	}
	keys, err := batchwire.DecodeRequest(m.Data, 0)
	if err != nil {
		return 0
	}
	return len(keys)
}

// noteSent records the answer to m in its record, if logged.
func (s *NATSServer) noteSent(m *nats.Msg, status int, version string, bytes int) {
	if s.cfg.AccessLog == nil {
		return
	}
	if v, ok := s.inflight.Load(m); ok {
		lr := v.(*natsLogRecord)
		lr.rec.status, lr.rec.version, lr.rec.bytes = status, version, int64(bytes)
	}
}

// noteKeys records the keys a NATS listing returned in its record, if
// logged.
func (s *NATSServer) noteKeys(m *nats.Msg, keys int) {
	if s.cfg.AccessLog == nil {
		return
	}
	if v, ok := s.inflight.Load(m); ok {
		v.(*natsLogRecord).rec.keys = keys
	}
}
