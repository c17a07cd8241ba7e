package edge

import (
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/time/rate"
)

// A lookup is answered by publishing to the reply subject its request
// names, from this node's connection, with this node's permissions: a
// reply of "$JS.API.STREAM.DELETE.<stream>" would make the answer a
// request to JetStream, and "$KV.<bucket>.<key>" a write of that key,
// whatever the requester may publish itself (NATS checks a requester's
// permissions on the subject, never on the reply). So a request is
// answered only when its reply subject starts with one of
// NATSConfig.ReplyPrefixes (nats.go's "_INBOX.", and "_R_." which a
// service import from another account makes of a requester's reply) and
// is a plain subject: no wildcard, no empty token, no white space. Any
// other request is dropped before the lookup, never answered, counted in
// spangle_nats_refused_replies_total{reason} and logged (rate-limited).

// Reasons a request's reply subject is refused: the reason label of
// spangle_nats_refused_replies_total.
const (
	refusedPrefix  = "prefix"  // outside NATSConfig.ReplyPrefixes
	refusedInvalid = "invalid" // a wildcard, an empty token or white space
	refusedNone    = "none"    // no reply subject: a publish, not a request
)

// refusedReasons lists the reasons, each counted from zero.
var refusedReasons = []string{refusedPrefix, refusedInvalid, refusedNone}

// refusedLogEvery and refusedLogBurst bound the log lines of refused
// replies: a flood of them is one line a second, each with the count of
// those not logged since the last.
const (
	refusedLogEvery = time.Second
	refusedLogBurst = 5
)

// replyGuard decides which reply subjects the NATS front door answers.
// Safe for concurrent use.
type replyGuard struct {
	prefixes []string
	log      *slog.Logger
	limit    *rate.Limiter
	dropped  atomic.Uint64 // refusals not logged since the last line
}

func newReplyGuard(prefixes []string, log *slog.Logger) *replyGuard {
	return &replyGuard{prefixes: prefixes, log: log, limit: rate.NewLimiter(rate.Every(refusedLogEvery), refusedLogBurst)}
}

// check returns "" when reply may be answered, else the reason it may
// not.
func (g *replyGuard) check(reply string) string {
	if reply == "" {
		return refusedNone
	}
	allowed := false
	for _, p := range g.prefixes {
		if strings.HasPrefix(reply, p) {
			allowed = true
			break
		}
	}
	if !allowed {
		return refusedPrefix
	}
	if !plainSubject(reply) {
		return refusedInvalid
	}
	return ""
}

// plainSubject reports whether s is a subject a message can be published
// to as it is: non-empty tokens without wildcards, white space or
// control characters.
func plainSubject(s string) bool {
	prev := byte('.') // a leading "." is an empty token
	for i := 0; i < len(s); i++ {
		c := s[i]
		if badSubjectByte[c] || c == '.' && prev == '.' {
			return false
		}
		prev = c
	}
	return prev != '.'
}

// badSubjectByte marks the bytes no token of a plain subject holds.
var badSubjectByte = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c <= ' ' || c == 0x7f || c == '*' || c == '>'
	}
	return t
}()

// refused counts and logs (rate-limited) a request of op whose reply
// subject was refused for reason.
func (s *NATSServer) refused(m *nats.Msg, op *natsOp, reason string) {
	op.refused[reason].Inc()
	if !s.guard.limit.Allow() {
		s.guard.dropped.Add(1)
		return
	}
	s.log.LogAttrs(s.ctx, slog.LevelWarn, "edge: NATS request not answered: its reply subject is refused",
		slog.String("op", op.name), slog.String("subject", m.Subject), slog.String("reply", quoteSubject(m.Reply)),
		slog.String("reason", reason), slog.Uint64("not_logged_since_last", s.guard.dropped.Swap(0)))
}

// maxLoggedSubject bounds a subject as logged: the requester chose it.
const maxLoggedSubject = 256

// quoteSubject returns s quoted (it may hold anything but white space),
// cut to maxLoggedSubject bytes.
func quoteSubject(s string) string {
	if len(s) > maxLoggedSubject {
		return fmt.Sprintf("%q…", s[:maxLoggedSubject])
	}
	return fmt.Sprintf("%q", s)
}

// replyAllowed reports whether m may be answered, counting and logging
// it as refused when not. Every handler calls it first, before any work.
func (s *NATSServer) replyAllowed(m *nats.Msg, op *natsOp) bool {
	reason := s.guard.check(m.Reply)
	if reason == "" {
		return true
	}
	s.refused(m, op, reason)
	return false
}
