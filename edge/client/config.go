package client

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spangledb/spangle/kvwatch/names"
	"github.com/spangledb/spangle/plugins/partition"
)

// Config configures a Client: either URLs (HTTP) or Conn (NATS). Start from
// DefaultConfig.
type Config struct {
	// URLs are the base URLs of nodes ("http://host:9599"), for HTTP. A
	// lookup starts at the next one in turn and moves on to the others on
	// connection errors and 5xx. Exclusive with Conn.
	URLs []string
	// Transport carries the HTTP requests. Default nil: a keep-alive
	// transport with up to 64 idle connections per node.
	Transport http.RoundTripper

	// Conn is a NATS connection, for NATS. The caller owns it and closes it
	// after Close. Exclusive with URLs.
	Conn *nats.Conn
	// ClusterName is the spangle cluster: subjects start with
	// "spangle.<ClusterName>." and the KV buckets are
	// "spangle_<ClusterName>_*". Default "spangle".
	ClusterName string
	// Domain is the JetStream domain of the KV buckets the cluster map is
	// read from: "" for the connection's own, a region's name to read
	// that region's map from the hub across leafnodes (spangle status
	// --regions). Lookups are not routed by it: a region's front door is
	// reached in that region. Default "".
	Domain string
	// Partitioners adds partitioners by identity, for versions built with
	// a Wasm plugin ("wasm:sha256:..."): open the module with
	// plugins.OpenPartitioner. A version whose partitioner is neither
	// built in nor here is read through the get subject (any node
	// partitions the key). The caller closes them after Close.
	Partitioners []partition.Partitioner
	// MapRetry is how often the cluster map is read: the last entry of
	// every key of the three buckets, with batched direct gets (a
	// client's NATS account may have no JetStream of its own,
	// docs/SECURITY.md). Default 1s.
	MapRetry time.Duration

	// Timeout bounds each attempt (the caller's context bounds the whole
	// lookup). Default 2s.
	Timeout time.Duration
	// Attempts is how many times a lookup is tried before it fails with
	// ErrUnavailable. Default 3.
	Attempts int
	// Backoff is the pause after the first failed attempt; it doubles
	// after each one, up to MaxBackoff, each pause drawn from its upper
	// half (jitter). Default 10ms.
	Backoff time.Duration
	// MaxBackoff bounds the pause between attempts; it is also how long a
	// node that refused or dropped a connection is skipped (HTTP).
	// Default 500ms.
	MaxBackoff time.Duration

	// Logger receives the cluster map's problems. Default nil: discard.
	Logger *slog.Logger
}

// DefaultConfig returns the defaults, with neither URLs nor Conn.
func DefaultConfig() Config {
	return Config{
		ClusterName: "spangle",
		MapRetry:    time.Second,
		Timeout:     2 * time.Second,
		Attempts:    3,
		Backoff:     10 * time.Millisecond,
		MaxBackoff:  500 * time.Millisecond,
	}
}

// Validate reports the first invalid field, wrapping ErrInvalidConfig.
func (c *Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case (len(c.URLs) == 0) == (c.Conn == nil):
		return bad("set either URLs (HTTP) or Conn (NATS)")
	case !names.Valid(c.ClusterName):
		return bad("ClusterName %q must match ^[-_a-zA-Z0-9]+$", c.ClusterName)
	case c.Domain != "" && !names.Valid(c.Domain):
		return bad("Domain %q must match ^[-_a-zA-Z0-9]+$", c.Domain)
	case c.MapRetry <= 0:
		return bad("MapRetry %v is not positive", c.MapRetry)
	case c.Timeout <= 0:
		return bad("Timeout %v is not positive", c.Timeout)
	case c.Attempts <= 0:
		return bad("Attempts %d is not positive", c.Attempts)
	case c.Backoff < 0 || c.MaxBackoff < c.Backoff:
		return bad("Backoff %v and MaxBackoff %v: want 0 <= Backoff <= MaxBackoff", c.Backoff, c.MaxBackoff)
	}
	for _, u := range c.URLs {
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			return bad("URL %q: want http://host:port", u)
		}
	}
	for _, p := range c.Partitioners {
		if p == nil {
			return bad("nil partitioner")
		}
	}
	return nil
}
