package proxy

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Config configures a Proxy. Build one with DefaultConfig and change what
// you need; New validates it. Nil injected fields get the default stated.
type Config struct {
	// PeerToken, when set, is sent to peers in X-Spangle-Peer-Token: the
	// cluster's shared secret that lets peers tell members' proxied
	// requests from anyone else's. Default "": none.
	PeerToken string

	// Timeout caps a proxied lookup, from the first attempt to the last
	// byte of the winning body: sequins' proxy_timeout. After it, Get
	// returns ErrTimeout. Default 100ms, sequins' default: a lookup
	// served from a peer's page cache takes well under a millisecond on
	// a LAN, so 100ms only runs out when every replica is stuck. Must be
	// > 0.
	Timeout time.Duration
	// ListTimeout caps a page of a key listing asked of peers (List),
	// from the first attempt to the last byte of the winning page; a
	// page costs a peer more than a lookup. Default 2s. Must be > 0.
	ListTimeout time.Duration
	// StageTimeout is how long an attempt runs alone before a backup
	// attempt starts on the next peer: sequins' proxy_stage_timeout. The
	// proxy does not know the replication; sequins' default,
	// proxy_timeout / replication, is for the caller to compute. Default
	// 50ms (100ms over sequins' default replication of 2). Must be > 0; a
	// value ≥ Timeout turns backup requests off (the next peer is then
	// tried only when an attempt fails).
	StageTimeout time.Duration
	// MaxBodyBytes bounds a peer's response body; a longer one fails the
	// attempt with ErrBodyTooLarge. Default 64 MiB. Must be > 0.
	MaxBodyBytes int64
	// MaxConnsPerPeer caps the requests in flight to one peer, each on
	// its own keep-alive connection. A lookup for a peer with no request
	// in flight is sent at once; lookups for a peer with one wait for it
	// and go together, as one batch request (see MaxBatchKeys), when it
	// returns; another request starts alongside, up to MaxConnsPerPeer,
	// only when a full batch waits. Default 2. Must be > 0.
	MaxConnsPerPeer int
	// MaxBatchKeys caps the lookups one request to a peer carries: more
	// than one go as POST /<db>/_batch?proxy=<version> (edge/BATCH.md)
	// instead of one GET each. 1 turns batching off: each lookup then
	// gets its own request, up to MaxConnsPerPeer at a time. Default 64,
	// far below a peer's default limit (edge's MaxBatchKeys, 1000); a
	// peer that refuses a batch gets its lookups one by one. Must be > 0.
	MaxBatchKeys int
	// MaxBatchBytes caps the keys' bytes in one batch request; a lookup
	// whose key alone exceeds it is sent alone. Default 64 KiB, far
	// below a peer's default limit (edge's MaxBatchBytes, 1 MiB). Must
	// be > 0.
	MaxBatchBytes int
	// TLS, when set, makes the requests to peers HTTPS. The made
	// Transport calls it for each new connection to a peer and verifies
	// and authenticates the connection with what it returns (its
	// RootCAs, its client certificate; ServerName, if empty, is the
	// peer's host), so that CAs reloaded meanwhile apply
	// (edge.TLS.PeerConfig); it must be safe for concurrent use and
	// never return nil, and New does not call it. An injected Transport
	// is used as it is and must be configured alike. Peers then speak
	// HTTP/1.1 over TLS, so that MaxConnsPerPeer still counts
	// connections. Default nil: plain HTTP.
	TLS func() *tls.Config
	// Transport sends the requests to peers and keeps their connections
	// alive. Default nil: New makes one with a keep-alive pool of up to
	// 128 idle connections per peer (well above MaxConnsPerPeer), 90s
	// idle timeout, 5s dial timeout, no HTTP proxy from the environment
	// and no compression, and closes its idle connections on Shutdown.
	// An injected transport stays the caller's; Shutdown only closes its
	// idle connections. Its MaxIdleConnsPerHost should be at least
	// MaxConnsPerPeer, or connections are closed and dialled again.
	Transport *http.Transport
	// Rand shuffles the peers of each lookup. Default nil: the runtime's
	// random source. An injected source is used under a lock (tests seed
	// one to fix the order).
	Rand rand.Source
	// Logger receives attempt failures at debug level. Default nil:
	// discard.
	Logger *slog.Logger
	// Registerer receives the proxy's metrics (see the package doc).
	// Default nil: not registered.
	Registerer prometheus.Registerer
	// OnAttempt, if set, is called with the peer's address as each
	// attempt starts, from the goroutine that starts it (Get's, a stage
	// timer's or the one that saw the previous attempt fail), one call
	// at a time per lookup. It must not block. Default nil. (For
	// tracing, and for tests to count attempts instead of sleeping.)
	OnAttempt func(peer string)
	// OnCoalesce, if set, is called each time a Get joins an identical
	// lookup already in flight instead of starting its own, from that
	// Get's goroutine, before it waits. It must not block. Default nil.
	OnCoalesce func()
}

// DefaultConfig returns the defaults stated on each field.
func DefaultConfig() Config {
	return Config{
		Timeout:         100 * time.Millisecond,
		StageTimeout:    50 * time.Millisecond,
		ListTimeout:     2 * time.Second,
		MaxBodyBytes:    64 << 20,
		MaxConnsPerPeer: 2,
		MaxBatchKeys:    64,
		MaxBatchBytes:   64 << 10,
	}
}

// Validate reports the first invalid field, wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	switch {
	case c.Timeout <= 0:
		return fmt.Errorf("%w: Timeout %v must be > 0", ErrInvalidConfig, c.Timeout)
	case c.ListTimeout <= 0:
		return fmt.Errorf("%w: ListTimeout %v must be > 0", ErrInvalidConfig, c.ListTimeout)
	case c.StageTimeout <= 0:
		return fmt.Errorf("%w: StageTimeout %v must be > 0", ErrInvalidConfig, c.StageTimeout)
	case c.MaxBodyBytes <= 0:
		return fmt.Errorf("%w: MaxBodyBytes %d must be > 0", ErrInvalidConfig, c.MaxBodyBytes)
	case c.MaxConnsPerPeer <= 0:
		return fmt.Errorf("%w: MaxConnsPerPeer %d must be > 0", ErrInvalidConfig, c.MaxConnsPerPeer)
	case c.MaxBatchKeys <= 0:
		return fmt.Errorf("%w: MaxBatchKeys %d must be > 0", ErrInvalidConfig, c.MaxBatchKeys)
	case c.MaxBatchBytes <= 0:
		return fmt.Errorf("%w: MaxBatchBytes %d must be > 0", ErrInvalidConfig, c.MaxBatchBytes)
	}
	return nil
}
