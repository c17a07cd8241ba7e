package edge

import (
	"log/slog"
	"testing"

	"github.com/nats-io/nats.go"
)

// BenchmarkReplyCheck is the cost the reply check adds to every NATS
// lookup: a reply subject as nats.go makes them (new-style request:
// _INBOX.<nuid>.<token>), checked against the default prefixes.
func BenchmarkReplyCheck(b *testing.B) {
	g := newReplyGuard(DefaultNATSConfig().ReplyPrefixes, slog.New(slog.DiscardHandler))
	reply := nats.NewInbox() + ".Ab3dEf9h"
	for b.Loop() {
		if g.check(reply) != "" {
			b.Fatal("refused")
		}
	}
}
