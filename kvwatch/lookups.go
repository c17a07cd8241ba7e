package kvwatch

import (
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/nats-io/nats.go"
)

// LookupConn connects this node's login in the client account
// (RoleResponder, accounts.go), on which the NATS front door answers the
// clients' lookups so that they cross no service import: on the embedded
// server with a client account, an NKey made at New (selfKeys); on URLs,
// Config.LookupCredsFile or LookupNKeySeedFile. It returns nil, nil when
// there is no such login. Call it after Start. Like Conn, the connection
// never gives up reconnecting (it follows a restart of the embedded
// server); unlike Conn, the caller owns it and closes it, before
// Shutdown.
func (k *KV) LookupConn() (*nats.Conn, error) {
	c := k.cfg
	var urls string
	var opts []nats.Option
	switch {
	case c.Embedded() && k.self.lookups != nil:
		auth, err := selfAuth(k.self.lookups)
		if err != nil {
			return nil, err
		}
		urls = k.ClientURL()
		opts = []nats.Option{nats.InProcessServer(&k.emb), auth}
	case !c.Embedded() && (c.LookupCredsFile != "" || c.LookupNKeySeedFile != ""):
		o := c.natsOptions()
		o.CredsFile, o.NKeySeedFile = c.LookupCredsFile, c.LookupNKeySeedFile
		var err error
		if opts, err = o.Auth(); err != nil {
			return nil, fmt.Errorf("kvwatch: lookups login: %w", err)
		}
		urls = withoutLogin(c.URLs)
	default:
		return nil, nil
	}
	log := k.log.With("conn", "lookups")
	var lastErr atomic.Value // string: the last failed attempt's error, logged once
	lastErr.Store("")
	opts = append(opts, c.reconnectOptions()...)
	opts = append(opts,
		nats.Name(c.ConnName+"-lookups"),
		nats.Timeout(c.OpTimeout),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("NATS lookups connection lost", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("NATS lookups connection restored", "url", nc.ConnectedUrlRedacted()) }),
		nats.ConnectHandler(func(nc *nats.Conn) { log.Info("NATS lookups connection up", "url", nc.ConnectedUrlRedacted()) }),
		// A refused login (a wrong lookup_nkey) leaves the clients with
		// no responder: say so once per distinct error, not per attempt.
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
			if err == nil {
				return
			}
			if msg := err.Error(); lastErr.Swap(msg) != msg {
				log.Warn("NATS lookups connection failed; retrying", "err", err)
			}
		}),
		nats.ErrorHandler(k.onAsyncError),
		nats.NoCallbacksAfterClientClose(),
	)
	nc, err := nats.Connect(urls, opts...)
	if err != nil {
		return nil, fmt.Errorf("kvwatch: lookups login: connect %s: %w", urls, err)
	}
	return nc, nil
}

// withoutLogin returns urls, comma-separated, without the user and
// password they may carry (the node's own login, which would log the
// lookups login in as the node instead).
func withoutLogin(urls []string) string {
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = strings.TrimSpace(u)
		if p, err := url.Parse(out[i]); err == nil && p.User != nil {
			p.User = nil
			out[i] = p.String()
		}
	}
	return strings.Join(out, ",")
}
