package kvwatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/spangledb/spangle/kvwatch/names"
	"github.com/spangledb/spangle/kvwatch/region"
)

// embedded runs the in-process nats-server and hands in-process connections
// to the client.
//
// The client connects through nats.InProcessServer(e), not over TCP: it
// halves request latency for the NATS front door that shares the
// connection. A client given the *server.Server itself would be bound to
// that instance for good (it never reconnects to a replacement), so the
// provider reads the current server from an atomic pointer instead: after
// a restart with a new instance, or once it is cleared at shutdown, the
// client's next reconnect attempt sees the change.
type embedded struct {
	srv atomic.Pointer[server.Server]
	// storeFailed is set when the server logs a failed store write (a
	// full disk): its streams then refuse every write until it restarts.
	storeFailed atomic.Bool
}

var errNoServer = errors.New("kvwatch: embedded server not running")

// InProcessConn implements nats.InProcessConnProvider.
func (e *embedded) InProcessConn() (net.Conn, error) {
	s := e.srv.Load()
	if s == nil || !s.Running() {
		return nil, errNoServer
	}
	return s.InProcessConn()
}

// serverOptions builds the nats-server options from the configuration;
// self are the node's own logins when c has users.
func serverOptions(c Config, self selfKeys) (*server.Options, error) {
	host, port, err := splitListen(c.EmbeddedListen)
	if err != nil {
		return nil, err
	}
	o := &server.Options{
		ServerName:         c.EmbeddedServerName,
		Host:               host,
		Port:               port,
		JetStream:          true,
		JetStreamMaxMemory: c.EmbeddedMaxMemory,
		JetStreamMaxStore:  c.EmbeddedMaxStore,
		StoreDir:           c.EmbeddedStoreDir,
		NoSigs:             true,
	}
	if err := addUsers(o, c, self); err != nil {
		return nil, err
	}
	if c.Region.Enabled() {
		// The region's server: its JetStream is the region's domain, and
		// it is a leafnode of the hub.
		o.JetStreamDomain = c.Region.Name
		remote, err := region.Remote(c.Region)
		if err != nil {
			return nil, err
		}
		if len(c.EmbeddedUsers) > 0 {
			// The link carries the cluster account's subjects.
			remote.LocalAccount = names.ClusterAccount(c.ClusterName)
		}
		o.LeafNode.Remotes = []*server.RemoteLeafOpts{remote}
	}
	if c.EmbeddedClusterName != "" {
		chost, cport, err := splitListen(c.EmbeddedClusterListen)
		if err != nil {
			return nil, err
		}
		o.Cluster = server.ClusterOpts{Name: c.EmbeddedClusterName, Host: chost, Port: cport}
		for _, r := range c.EmbeddedRoutes {
			u, err := url.Parse(strings.TrimSpace(r))
			if err != nil {
				return nil, fmt.Errorf("route %q: %w", r, err)
			}
			o.Routes = append(o.Routes, u)
		}
	}
	return o, nil
}

// startServer starts a nats-server with o and waits until it accepts
// connections or ctx ends.
func (e *embedded) startServer(ctx context.Context, o *server.Options, log *slog.Logger) (*server.Server, error) {
	// nats-server only logs a port it cannot bind and then never becomes
	// ready: try it first, so that a busy port is an error at once.
	if o.Port > 0 {
		l, err := net.Listen("tcp", net.JoinHostPort(o.Host, strconv.Itoa(o.Port)))
		if err != nil {
			return nil, fmt.Errorf("%w: client port: %v", ErrEmbeddedServer, err)
		}
		l.Close()
	}
	if o.Cluster.Port > 0 {
		l, err := net.Listen("tcp", net.JoinHostPort(o.Cluster.Host, strconv.Itoa(o.Cluster.Port)))
		if err != nil {
			return nil, fmt.Errorf("%w: cluster port: %v", ErrEmbeddedServer, err)
		}
		l.Close()
	}
	s, err := server.NewServer(o)
	if err != nil {
		return nil, err
	}
	s.SetLoggerV2(serverLogger{log.With("component", "nats-server"), &e.storeFailed}, false, false, false)
	s.Start()
	for !s.ReadyForConnections(50 * time.Millisecond) {
		if ctx.Err() != nil {
			s.Shutdown()
			s.WaitForShutdown()
			return nil, fmt.Errorf("embedded server not ready: %w", ctx.Err())
		}
		if !s.Running() {
			return nil, errors.New("embedded server stopped while starting")
		}
	}
	return s, nil
}

// waitMetaCurrent waits until a clustered server's JetStream meta group is
// current, or ctx ends. Bucket requests sent before that go unanswered
// until they time out, which slows the start of a cluster by seconds.
func waitMetaCurrent(ctx context.Context, s *server.Server) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for s.JetStreamIsClustered() && !s.JetStreamIsCurrent() {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// serverLogger forwards nats-server logs to slog. Notices (a banner of
// twenty lines at start) go to Debug.
type serverLogger struct {
	log         *slog.Logger
	storeFailed *atomic.Bool
}

func (l serverLogger) Noticef(format string, v ...any) { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l serverLogger) Warnf(format string, v ...any)   { l.log.Warn(fmt.Sprintf(format, v...)) }
func (l serverLogger) Fatalf(format string, v ...any)  { l.log.Error(fmt.Sprintf(format, v...)) }
func (l serverLogger) Errorf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	if isStoreFailure(msg) {
		l.storeFailed.Store(true)
	}
	l.log.Error(msg)
}

// isStoreFailure reports whether a nats-server error message tells of a
// write its store could not make: after one, the stream's file store
// refuses writes until the server restarts (nats-server has no call to
// reset it, nor one to ask for this state, hence the log).
func isStoreFailure(msg string) bool {
	return strings.Contains(msg, "no space left on device") ||
		strings.Contains(msg, "Critical write error") ||
		strings.Contains(msg, "out of resources")
}
func (l serverLogger) Debugf(format string, v ...any) { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l serverLogger) Tracef(format string, v ...any) { l.log.Debug(fmt.Sprintf(format, v...)) }
