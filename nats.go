package spangle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/kvwatch"
)

// natsDoor starts kvwatch and then the NATS front door in the background,
// so that HTTP serves at once and keeps serving while NATS is unreachable
// (kvwatch.Start retries until it connects).
type natsDoor struct {
	log    *slog.Logger
	kv     *kvwatch.KV
	cfg    edge.NATSConfig // Conn is set once kvwatch has started
	cancel context.CancelFunc
	done   chan struct{} // closed when run returns
	// fatal receives the error that makes serving pointless: the embedded
	// NATS server cannot start (its port is taken, say). Never blocks.
	fatal chan<- error

	mu  sync.Mutex // guards srv and lookups
	srv *edge.NATSServer
	// lookups is the node's login in the clients' account
	// (kvwatch.KV.LookupConn), the front door's ClientConn; nil without.
	lookups *nats.Conn
}

func startNATS(log *slog.Logger, kv *kvwatch.KV, cfg edge.NATSConfig, fatal chan<- error) *natsDoor {
	ctx, cancel := context.WithCancel(context.Background())
	d := &natsDoor{log: log, kv: kv, cfg: cfg, cancel: cancel, done: make(chan struct{}), fatal: fatal}
	go d.run(ctx) // owned: stop cancels and waits for it
	return d
}

func (d *natsDoor) run(ctx context.Context) {
	defer close(d.done)
	if err := d.kv.Start(ctx); err != nil {
		if errors.Is(err, kvwatch.ErrEmbeddedServer) {
			// A node whose own NATS server is down would serve HTTP while
			// `spangle get --nats` silently reaches another process.
			err = fmt.Errorf("%w (its addresses are [nats] listen or --nats-listen, and [nats] embedded_cluster_listen; [nats] url or --nats uses a NATS server instead)", err)
			select {
			case d.fatal <- err:
			default:
			}
			return
		}
		if ctx.Err() == nil {
			d.log.Error("NATS unavailable: serving HTTP only", "err", err)
		}
		return
	}
	d.cfg.Conn = d.kv.Conn()
	lookups, err := d.kv.LookupConn()
	if err != nil {
		// The clients' lookups then find no responder in their account.
		d.log.Error("NATS front door: no login in the clients' account: answering in the cluster's only", "err", err)
	}
	d.cfg.ClientConn = lookups
	srv, err := edge.NewNATSServer(d.cfg)
	if err == nil {
		err = srv.Start()
	}
	if err != nil {
		if lookups != nil {
			lookups.Close()
		}
		d.log.Error("NATS front door not started: serving HTTP only", "err", err)
		return
	}
	d.mu.Lock()
	d.srv, d.lookups = srv, lookups
	d.mu.Unlock()
	d.log.Info("NATS front door serving", "subjects", edge.SubjectPrefix(d.cfg.ClusterName)+".>",
		"embedded_url", d.kv.ClientURL())
}

// stopFrontDoor cancels a start still under way and drains the front
// door's subscriptions. The connection stays up for stopKV.
func (d *natsDoor) stopFrontDoor(ctx context.Context) error {
	d.cancel()
	select {
	case <-d.done:
	case <-ctx.Done():
		return fmt.Errorf("NATS front door: %w", ctx.Err())
	}
	d.mu.Lock()
	srv, lookups := d.srv, d.lookups
	d.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Shutdown(ctx)
	if lookups != nil {
		lookups.Close()
	}
	return err
}

// stopKV withdraws what is left of this node's KV entries, closes the
// connection and stops the embedded server.
func (d *natsDoor) stopKV(ctx context.Context) error { return d.kv.Shutdown(ctx) }

// advertisedAddress is the HTTP host:port published in this node's
// entries: the bound address, with hostname (advertised_hostname) or, for
// a wildcard bind, the machine's hostname as the host.
func advertisedAddress(bound net.Addr, hostname string) string {
	host, port, err := net.SplitHostPort(bound.String())
	if err != nil {
		return bound.String()
	}
	if hostname == "" {
		if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
			return bound.String()
		}
		if hostname, err = os.Hostname(); err != nil {
			return bound.String()
		}
	}
	return net.JoinHostPort(hostname, port)
}
