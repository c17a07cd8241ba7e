// Package natstest runs real, embedded nats-servers with JetStream for
// tests, on loopback, and connects JetStream clients to them. Whatever it
// starts is stopped at test cleanup. It is for tests only: kvwatch's own,
// and those of the packages and commands that use NATS (node/source/objstore,
// cmd/spangle). It imports nothing of spangle but natsconn, so kvwatch's in-package
// tests can use it.
//
// # Caveats
//
// A server with an explicit Port can be stopped and started again on it
// (a restart), but the port is only known to be free while the first
// server holds it.
package natstest

import (
	"go.uber.org/goleak"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/kvwatch/natsconn"
)

// MirrorWait bounds a test's wait for a region's mirror of a hub stream
// to fill: a mirror whose first consumer request failed (the leafnode
// link was not up yet, or the machine is loaded) is retried by nats-server
// after 10 s, then 20 s more. Every region test derives its waits from it
// (a context of a test that waits for mirrors: 3×), so that none gives up
// before the retry it depends on.
const MirrorWait = 60 * time.Second

// ConnectTimeout bounds a test's connect to a test server, dial and
// handshake: the time RunServer gives a server to become ready. nats.go's
// default of 2 s ran out once under load (an i/o timeout in
// TestLeafPermissions, on a machine running the whole suite under -race).
const ConnectTimeout = 10 * time.Second

// RunServer starts a stand-alone JetStream server with o (nil: no
// settings), which it does not modify, and waits until it accepts
// connections. The server listens on the loopback at o.Port (a random
// port if zero) and keeps its data in o.StoreDir (a new temporary
// directory if empty); whatever else o sets (security, say) is kept. It
// is shut down at cleanup if still running; a test may shut it down
// before.
func RunServer(t testing.TB, o *server.Options) *server.Server {
	t.Helper()
	if o == nil {
		o = &server.Options{}
	}
	o = o.Clone()
	o.Host = "127.0.0.1"
	if o.Port == 0 {
		o.Port = -1
	}
	if o.StoreDir == "" {
		o.StoreDir = t.TempDir()
	}
	o.JetStream, o.NoSigs, o.NoLog = true, true, true
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	if !s.ReadyForConnections(ConnectTimeout) {
		t.Fatal("test server not ready")
	}
	return s
}

// JetStream connects to url with opts (after nats.Timeout(ConnectTimeout),
// which they may replace) and returns a JetStream handle on the
// connection, which is closed at cleanup.
func JetStream(t testing.TB, url string, opts ...nats.Option) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, append([]nats.Option{nats.Timeout(ConnectTimeout)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := natsconn.JetStream(nc, natsconn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// LeakOptions are the goleak options of packages whose tests use NATS.
// Goroutines of the NATS libraries that outlive their owners by design or
// by a bug of theirs are exempt, each for a reason:
//
//   - nats.go's jetstream async publish (the Object Store's uploads use
//     it) starts resetPendingAcksOnReconnect, which waits forever on a nil
//     status channel when the reply subscription is cleaned up before it
//     starts (nats.go v1.55.0, jetstream/publish.go);
//   - nats-server keeps a stream's file store flushing (and the access
//     time service it registers with) when the stream is created while the
//     server shuts down: a KV stopped during its start, its bucket
//     requests in flight, leaves one (nats-server v2.15.2,
//     server/filestore.go flushStreamStateLoop, server/ats).
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*fileStore).flushStreamStateLoop"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server/ats.Register.func1"),
	}
}
