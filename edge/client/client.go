package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spangledb/spangle/internal/backoff"
	"github.com/spangledb/spangle/plugins/partition"
)

// Result is the answer to one key. A missing key is Found false with a nil
// error and Version set.
type Result struct {
	// Value is the value; the caller owns it.
	Value []byte
	Found bool
	// Version is the version that answered. All results of one GetMany
	// carry the same.
	Version string
	// ContentType is the value's media type; "" means
	// application/octet-stream.
	ContentType string
}

// Client looks keys up in a spangle cluster, over HTTP or NATS. Create it
// with New, then Start; Close it when done. Its methods are safe for
// concurrent use.
type Client struct {
	cfg  Config
	log  *slog.Logger
	http *http.Client
	next atomic.Uint32  // round robin over cfg.URLs
	down []atomic.Int64 // per URL: unix nanoseconds until which it is skipped after a connection error

	partitioners map[string]partition.Partitioner // by identity, beside the built-ins

	cmap  atomic.Pointer[clusterMap] // NATS: never nil
	ready chan struct{}              // closed once the map was read whole (NATS) or at Start (HTTP)

	mu      sync.Mutex // guards started, closed, stop
	started bool
	closed  atomic.Bool
	stop    context.CancelFunc
	wg      sync.WaitGroup // the map watcher
}

// New validates cfg and returns a client; it starts nothing.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.URLs = append([]string(nil), cfg.URLs...)
	for i, u := range cfg.URLs {
		cfg.URLs[i] = strings.TrimRight(u, "/")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Client{
		cfg:          cfg,
		log:          log,
		partitioners: map[string]partition.Partitioner{},
		ready:        make(chan struct{}),
	}
	for _, p := range cfg.Partitioners {
		c.partitioners[p.Identity()] = p
	}
	c.cmap.Store(&clusterMap{})
	if len(cfg.URLs) > 0 {
		tr := cfg.Transport
		if tr == nil {
			tr = &http.Transport{
				Proxy:               http.ProxyFromEnvironment,
				DialContext:         (&net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}).DialContext,
				MaxIdleConns:        256,
				MaxIdleConnsPerHost: 64,
				IdleConnTimeout:     90 * time.Second,
				ForceAttemptHTTP2:   true,
			}
		}
		c.http = &http.Client{Transport: tr}
		c.down = make([]atomic.Int64, len(cfg.URLs))
	}
	return c, nil
}

// Start readies the client. Over NATS it starts reading the cluster map
// (the KV buckets, read-only) in the background and returns at once:
// lookups work before the map is read, through the get subject. Ready
// tells when the map has been read whole. Start fails after Close or on a
// second call.
func (c *Client) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed.Load():
		return ErrClosed
	case c.started:
		return errors.New("client: already started")
	}
	c.started = true
	if c.cfg.Conn == nil {
		close(c.ready)
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.stop = cancel
	w := newMapWatcher(c)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		w.run(ctx)
	}()
	return nil
}

// Ready returns a channel closed once the client has read the cluster map
// whole (NATS), or at Start (HTTP).
func (c *Client) Ready() <-chan struct{} { return c.ready }

// Close stops the map watcher and closes idle HTTP connections. It does
// not close Config.Conn. It is idempotent; ctx bounds the wait.
func (c *Client) Close(ctx context.Context) error {
	c.mu.Lock()
	c.closed.Store(true)
	stop := c.stop
	c.stop = nil
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
	done := make(chan struct{})
	go func() { // bounded: the watcher returns once its context is cancelled
		c.wg.Wait()
		close(done)
	}()
	if c.http != nil {
		c.http.CloseIdleConnections()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("client: close: %w", ctx.Err())
	}
}

// Get looks key up in db. The caller keeps ownership of key. Over NATS it
// reaches a replica of the key's partition in one hop when the cluster map
// knows the db's version and partitioner, and asks any node otherwise.
// It retries on other nodes (HTTP) or later (NATS) after connection
// errors, timeouts and 5xx, up to Config.Attempts.
func (c *Client) Get(ctx context.Context, db string, key []byte) (Result, error) {
	if c.closed.Load() {
		return Result{}, ErrClosed
	}
	for a := c.newAttempts(); ; {
		var res Result
		var retry bool
		var err error
		if c.cfg.Conn != nil {
			res, retry, err = c.natsGet(ctx, db, key)
		} else {
			res, retry, err = c.httpGet(ctx, &a, db, key)
		}
		if err == nil || !retry {
			return res, err
		}
		if err := a.next(ctx, err); err != nil {
			return Result{}, err
		}
	}
}

// GetMany looks keys up in db in one request, all from one version, and
// returns one Result per key, in order. The caller keeps ownership of
// keys. A batch larger than the nodes' limits (1000 keys, 1 MiB by
// default) or whose answer exceeds NATS's max_payload fails with
// ErrTooLarge: split it. It retries as Get does.
func (c *Client) GetMany(ctx context.Context, db string, keys [][]byte) ([]Result, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	for a := c.newAttempts(); ; {
		var res []Result
		var retry bool
		var err error
		if c.cfg.Conn != nil {
			res, retry, err = c.natsGetMany(ctx, db, keys)
		} else {
			res, retry, err = c.httpGetMany(ctx, &a, db, keys)
		}
		if err == nil || !retry {
			return res, err
		}
		if err := a.next(ctx, err); err != nil {
			return nil, err
		}
	}
}

// attempts counts the attempts of one lookup and paces them. Over HTTP,
// attempt i goes to the node after the one attempt i-1 went to.
type attempts struct {
	left  int
	pause backoff.Backoff
	node  int // HTTP: index in Config.URLs of the next node to ask
}

func (c *Client) newAttempts() attempts {
	a := attempts{left: c.cfg.Attempts - 1, pause: backoff.New(c.cfg.Backoff, c.cfg.MaxBackoff)}
	if len(c.cfg.URLs) > 0 {
		a.node = int((c.next.Add(1) - 1) % uint32(len(c.cfg.URLs)))
	}
	return a
}

// next records a retryable failure and waits before the next attempt. It
// returns the error to give up with when no attempt is left or ctx ends.
func (a *attempts) next(ctx context.Context, failure error) error {
	if a.left <= 0 {
		return fmt.Errorf("%w: %w", ErrUnavailable, unprefixed{failure})
	}
	a.left--
	if !a.pause.Wait(ctx) {
		return fmt.Errorf("%w: %w (last failure: %w)", ErrUnavailable, ctx.Err(), unprefixed{failure})
	}
	return nil
}

// unprefixed is an attempt's failure inside ErrUnavailable, whose message
// already says "client: ": its own prefix is dropped, so that it is said
// once ("client: no node answered: GET …").
type unprefixed struct{ error }

func (u unprefixed) Error() string { return strings.TrimPrefix(u.error.Error(), "client: ") }
func (u unprefixed) Unwrap() error { return u.error }

// attemptContext bounds one attempt by Config.Timeout: ctx itself when its
// deadline comes sooner, else a derived context (cancel must be called).
func (c *Client) attemptContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= c.cfg.Timeout {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.cfg.Timeout)
}

// partitioner returns the partitioner of an identity, or nil if this
// client has none.
func (c *Client) partitioner(identity string) partition.Partitioner {
	if p, ok := c.partitioners[identity]; ok {
		return p
	}
	if strings.HasPrefix(identity, partition.WasmPrefix) {
		return nil
	}
	p, err := partition.Builtin(identity)
	if err != nil {
		return nil
	}
	return p
}
