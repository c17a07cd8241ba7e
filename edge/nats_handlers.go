package edge

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spangledb/spangle/edge/internal/natswire"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/batchwire"
)

// natsDB caches the reply headers of one db's last version.
type natsDB struct {
	headers atomic.Pointer[natsHeaders]
}

// natsHeaders are the reply headers of one (version, content type). The
// maps are shared by every reply that uses them and never modified: nats
// only reads a message's headers while encoding it.
type natsHeaders struct {
	version     string
	contentType string
	found       nats.Header // 200, version, content type
	missing     nats.Header // 404, version
	batch       nats.Header // 200, version, batch content type
}

var (
	statusOK       = []string{"200"}
	statusNotFound = []string{"404"}
)

// headersFor returns the cached reply headers for res, from a lookup of db
// that the backend answered (so db is known, and the cache bounded).
func (s *NATSServer) headersFor(db string, res *node.Result) *natsHeaders {
	v, ok := s.headers.Load(db)
	if !ok {
		v, _ = s.headers.LoadOrStore(db, &natsDB{})
	}
	ndb := v.(*natsDB)
	if hs := ndb.headers.Load(); hs != nil && hs.version == res.Version && hs.contentType == res.ContentType {
		return hs
	}
	version := []string{res.Version}
	ct := valOctetStream
	if res.ContentType != "" {
		ct = []string{res.ContentType}
	}
	hs := &natsHeaders{
		version:     res.Version,
		contentType: res.ContentType,
		found: nats.Header{
			natswire.HeaderStatus:      statusOK,
			natswire.HeaderVersion:     version,
			natswire.HeaderContentType: ct,
		},
		missing: nats.Header{
			natswire.HeaderStatus:  statusNotFound,
			natswire.HeaderVersion: version,
		},
		batch: nats.Header{
			natswire.HeaderStatus:      statusOK,
			natswire.HeaderVersion:     version,
			natswire.HeaderContentType: valBatch,
		},
	}
	ndb.headers.Store(hs)
	return hs
}

// forgetRemoved drops the cached headers of the dbs the backend has
// removed (RemovedDBs); called by follow at each change of the held
// versions.
func (s *NATSServer) forgetRemoved() {
	rd, ok := s.backend.(RemovedDBs)
	if !ok {
		return
	}
	s.headers.Range(func(db, _ any) bool {
		if !rd.HasDB(db.(string)) {
			s.headers.Delete(db)
		}
		return true
	})
}

// onGet answers spangle.<cluster>.get.<db>: the payload is the key.
func (s *NATSServer) onGet(m *nats.Msg) {
	if !s.replyAllowed(m, s.met.get) {
		return
	}
	defer s.recoverNATS(s.ctx, m, s.met.get)
	start := time.Now()
	db := strings.TrimPrefix(m.Subject, s.getPrefix)
	res, err := s.backend.Get(s.ctx, db, m.Data, node.GetOptions{Raw: rawRequest(m)})
	s.answer(m, s.met.get, db, &res, err, start)
}

// onPart answers spangle.<cluster>.part.<db>.<version>.<p>: keys of
// partition p of the db's active version; a request naming another
// version is answered from the active one, which Spangle-Version names
// (node.Node.GetPart).
func (s *NATSServer) onPart(m *nats.Msg, db, version string, p int) {
	if !s.replyAllowed(m, s.met.part) {
		return
	}
	defer s.recoverNATS(s.ctx, m, s.met.part)
	start := time.Now()
	res, err := s.backend.GetPart(s.ctx, db, version, p, m.Data, node.GetOptions{Raw: rawRequest(m)})
	s.answer(m, s.met.part, db, &res, err, start)
}

// rawRequest reports whether a request asks for values as stored.
func rawRequest(m *nats.Msg) bool {
	return m.Header != nil && natswire.Raw(m.Header.Get(natswire.HeaderRaw))
}

// answer replies to a single lookup.
func (s *NATSServer) answer(m *nats.Msg, op *natsOp, db string, res *node.Result, err error, start time.Time) {
	var status int
	switch {
	case err != nil:
		status = s.answerError(m, op, db, "", err)
	case !res.Found:
		status = s.send(m, s.headersFor(db, res).missing, nil, res.Version, http.StatusNotFound)
	default:
		status = s.send(m, s.headersFor(db, res).found, res.Value, res.Version, http.StatusOK)
	}
	op.observe(status, time.Since(start))
}

// onMGet answers spangle.<cluster>.mget.<db>: the payload is a batch
// request, the reply a batch reply (edge/BATCH.md).
func (s *NATSServer) onMGet(m *nats.Msg) {
	if !s.replyAllowed(m, s.met.mget) {
		return
	}
	defer s.recoverNATS(s.ctx, m, s.met.mget)
	start := time.Now()
	db := strings.TrimPrefix(m.Subject, s.mgetPrefix)
	status := s.mget(m, db)
	s.met.mget.observe(status, time.Since(start))
}

func (s *NATSServer) mget(m *nats.Msg, db string) int {
	if len(m.Data) > s.cfg.MaxBatchBytes {
		err := fmt.Errorf("%w: batch request of %d bytes, at most %d allowed", errTooLarge, len(m.Data), s.cfg.MaxBatchBytes)
		return s.answerError(m, s.met.mget, db, "", err)
	}
	keys, err := batchwire.DecodeRequest(m.Data, s.cfg.MaxBatchKeys)
	if err != nil {
		return s.answerError(m, s.met.mget, db, "", err)
	}
	// The reply must fit in one NATS message: stop reading values there.
	version, results, err := s.backend.GetMany(s.ctx, db, keys, node.GetOptions{Raw: rawRequest(m), MaxBytes: int(s.nc.MaxPayload())})
	if err != nil {
		return s.answerError(m, s.met.mget, db, "", err)
	}
	ct := batchContentType(results)
	size := batchReplySize(version, ct, results)
	if limit := s.nc.MaxPayload(); limit > 0 && int64(size) > limit {
		err := fmt.Errorf("%w: batch reply of %d bytes exceeds the NATS max_payload of %d bytes; ask for fewer keys", errTooLarge, size, limit)
		return s.answerError(m, s.met.mget, db, version, err)
	}
	res := node.Result{Version: version, ContentType: ct}
	data := appendBatchReply(make([]byte, 0, size), version, ct, results)
	return s.send(m, s.headersFor(db, &res).batch, data, version, http.StatusOK)
}

// answerError replies with the status the wire-code table gives err, an
// empty body, Spangle-Error when the row has a message, and
// Spangle-Version when version is set. It logs as the row says.
func (s *NATSServer) answerError(m *nats.Msg, op *natsOp, db, version string, err error) int {
	row := wireCodeFor(s.ctx, err)
	h := nats.Header{natswire.HeaderStatus: []string{statusText(row.status)}}
	if msg := strings.TrimSpace(row.message(err)); msg != "" {
		h[natswire.HeaderError] = []string{msg}
	}
	if version != "" {
		h[natswire.HeaderVersion] = []string{version}
	}
	if !row.quiet {
		s.log.LogAttrs(s.ctx, row.level, "edge: NATS lookup failed",
			slog.String("op", op.name), slog.String("db", db), slog.Int("status", row.status), slog.Any("err", err))
	}
	return s.send(m, h, nil, "", row.status)
}

// replies recycles reply messages: nats only reads one while publishing
// it, so a reply is free again once RespondMsg returns.
var replies = sync.Pool{New: func() any { return new(nats.Msg) }}

// send publishes a reply of hdr and data to m's reply subject and returns
// the status answered. A reply over the server's max_payload is replaced
// by a 413 that says so, so that the requester gets an answer rather than
// a timeout.
func (s *NATSServer) send(m *nats.Msg, hdr nats.Header, data []byte, version string, status int) int {
	s.noteSent(m, status, version, len(data))
	if m.Reply == "" {
		return status // a publish, not a request: nobody to answer
	}
	reply := replies.Get().(*nats.Msg)
	reply.Header, reply.Data = hdr, data
	err := m.RespondMsg(reply)
	*reply = nats.Msg{}
	replies.Put(reply)
	if err == nil {
		return status
	}
	if errors.Is(err, nats.ErrMaxPayload) && status != http.StatusRequestEntityTooLarge {
		tooBig := fmt.Errorf("%w: answer of %d bytes exceeds the NATS max_payload of %d bytes", errTooLarge, len(data), s.nc.MaxPayload())
		h := nats.Header{
			natswire.HeaderStatus: []string{statusText(http.StatusRequestEntityTooLarge)},
			natswire.HeaderError:  []string{tooBig.Error()},
		}
		if version != "" {
			h[natswire.HeaderVersion] = []string{version}
		}
		s.log.Info("edge: NATS answer too large", "subject", m.Subject, "bytes", len(data))
		if err = m.RespondMsg(&nats.Msg{Header: h}); err == nil {
			s.noteSent(m, http.StatusRequestEntityTooLarge, version, 0)
			return http.StatusRequestEntityTooLarge
		}
	}
	s.log.Debug("edge: cannot answer a NATS request", "subject", m.Subject, "err", err)
	return status
}
