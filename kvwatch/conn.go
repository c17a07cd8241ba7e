package kvwatch

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/kvwatch/natsconn"
	"github.com/spangledb/spangle/kvwatch/region"
)

// link is KV's connection part: the NATS connection and the JetStream
// handles bound by Start. It never changes once made (a reconnect, or a
// restart of the embedded server, keeps the connection), so each loop is
// handed it at start and reads it without a lock; API callers reach it
// through handles, which checks the lifecycle first.
type link struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	kvs [numBuckets]jetstream.KeyValue
}

// connOptions returns the client options besides natsOptions' (name,
// timeout, credentials, TLS). The client:
//   - never gives up reconnecting (the default stops after about two
//     minutes, or once one server refused the credentials twice in a row,
//     which would leave a node cut off for good, say while credentials
//     are being rotated);
//   - has no reconnect buffer, so a call made while disconnected fails at
//     once instead of being queued and applied late (a queued plain write
//     could, for instance, resurrect an entry after its node left);
//   - pings every Heartbeat, so a dead server is noticed within about
//     EntryTTL rather than minutes;
//   - reports connection changes to the watch loop and the heartbeat.
func (k *KV) connOptions() ([]nats.Option, error) {
	c := k.cfg
	opts := append(c.reconnectOptions(),
		nats.DisconnectErrHandler(k.events.onDisconnect),
		nats.ReconnectHandler(k.events.onReconnect),
		nats.ConnectHandler(k.events.onConnect),
		nats.ErrorHandler(k.onAsyncError),
		nats.ReconnectErrHandler(k.events.onReconnectError),
		nats.NoCallbacksAfterClientClose(),
	)
	if c.Region.Enabled() {
		// The hub sends a region only the replies under its prefix.
		opts = append(opts, nats.CustomInboxPrefix(region.InboxPrefix(c.Region.Name)))
	}
	if c.Embedded() {
		opts = append(opts, nats.InProcessServer(&k.emb))
		if len(c.EmbeddedUsers) > 0 {
			auth, err := selfAuth(k.self.cluster)
			if err != nil {
				return nil, err
			}
			opts = append(opts, auth)
		}
	}
	return opts, nil
}

// reconnectOptions is how every connection of a KV retries and notices a
// dead server: it never gives up reconnecting (even after refused
// credentials), buffers nothing while disconnected, and pings every
// Heartbeat.
func (c Config) reconnectOptions() []nats.Option {
	return []nats.Option{
		nats.MaxReconnects(-1),
		nats.IgnoreAuthErrorAbort(),
		nats.ReconnectWait(c.ReconnectWait),
		nats.ReconnectJitter(c.ReconnectWait/10, c.ReconnectWait/10),
		nats.ReconnectBufSize(-1),
		nats.RetryOnFailedConnect(true),
		nats.PingInterval(c.heartbeat()),
		nats.MaxPingsOutstanding(2),
	}
}

// natsOptions returns how the configuration reaches NATS and JetStream
// (natsconn), apart from the KV's own client behaviour (connOptions). The
// embedded server is reached in-process, without credentials or TLS.
func (c Config) natsOptions() natsconn.Options {
	if c.Embedded() {
		return natsconn.Options{Name: c.ConnName, Timeout: c.OpTimeout}
	}
	return natsconn.Options{
		Name:                  c.ConnName,
		Timeout:               c.OpTimeout,
		CredsFile:             c.CredsFile,
		NKeySeedFile:          c.NKeySeedFile,
		TLSCAFile:             c.TLSCAFile,
		TLSCertFile:           c.TLSCertFile,
		TLSKeyFile:            c.TLSKeyFile,
		TLSInsecureSkipVerify: c.TLSInsecureSkipVerify,
	}
}

// notConnectedError adds to err, the error of a request on nc, why nc is
// not connected if it is not: a request then fails with "outbound buffer
// limit exceeded" or "connection closed", which hides the TLS or
// authorization failure that keeps the connection down.
func notConnectedError(nc *nats.Conn, err error) error {
	if nc == nil || nc.IsConnected() {
		return err
	}
	if last := nc.LastError(); last != nil && !errors.Is(err, last) {
		return fmt.Errorf("%w; not connected: %w", err, last)
	}
	return err
}

// connEvents owns what the NATS client's callbacks learn of the
// connection, for the two loops that act on it: the watch loop (woken by
// watch; it reads reconnects and takes disconnectedAt) and the heartbeat
// (woken by refresh). The callbacks run on the client's goroutine and only
// write here; nothing is locked.
type connEvents struct {
	log             *slog.Logger
	reconnectsTotal prometheus.Counter

	reconnects       atomic.Uint64 // reconnections so far
	lastReconnectErr atomic.Value  // string: the last failed reconnect's error, logged once
	disconnectedAt   atomic.Int64  // unix nanoseconds of the first disconnect not yet handled, 0 if none

	watch   chan struct{} // wakes the watch loop to look at the connection, buffer 1
	refresh chan struct{} // wakes the heartbeat to refresh now, buffer 1
}

func newConnEvents(log *slog.Logger, reconnectsTotal prometheus.Counter) *connEvents {
	return &connEvents{log: log, reconnectsTotal: reconnectsTotal,
		watch: make(chan struct{}, 1), refresh: make(chan struct{}, 1)}
}

// onDisconnect runs on the client's callback goroutine when the connection
// drops.
func (e *connEvents) onDisconnect(_ *nats.Conn, err error) {
	e.disconnectedAt.CompareAndSwap(0, time.Now().UnixNano())
	e.log.Warn("NATS connection lost", "err", err)
	kick(e.watch)
}

// onReconnect runs on the client's callback goroutine after a reconnect:
// the watch loop re-creates the watchers and the heartbeat re-puts every
// own entry at once.
func (e *connEvents) onReconnect(nc *nats.Conn) {
	e.lastReconnectErr.Store("")
	e.reconnects.Add(1)
	e.reconnectsTotal.Inc()
	e.log.Info("NATS connection restored", "url", nc.ConnectedUrlRedacted())
	kick(e.watch)
	kick(e.refresh)
}

// onConnect runs when a first connection that had failed (RetryOnFailedConnect)
// succeeds.
func (e *connEvents) onConnect(nc *nats.Conn) {
	e.log.Info("NATS connected", "url", nc.ConnectedUrlRedacted())
	kick(e.watch)
	kick(e.refresh)
}

// onReconnectError runs on the client's callback goroutine after each
// failed reconnect attempt. A refusal that would otherwise go unseen (bad
// credentials, a TLS mismatch) is logged at Warn when its text changes, at
// Debug while it repeats.
func (e *connEvents) onReconnectError(_ *nats.Conn, err error) {
	if err == nil {
		return
	}
	msg := err.Error()
	if prev, _ := e.lastReconnectErr.Swap(msg).(string); prev == msg {
		e.log.Debug("NATS reconnect failed", "err", err)
		return
	}
	e.log.Warn("NATS reconnect failed; retrying", "err", err)
}

// onAsyncError logs asynchronous client errors (slow consumers and such).
func (k *KV) onAsyncError(_ *nats.Conn, sub *nats.Subscription, err error) {
	subject := ""
	if sub != nil {
		subject = sub.Subject
	}
	k.log.Warn("NATS async error", "subject", subject, "err", err)
}
