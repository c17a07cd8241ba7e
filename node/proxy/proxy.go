package proxy

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// Request is one lookup to proxy.
type Request struct {
	DB      string // db name; required
	Version string // version to read, sent as ?proxy=<version>; required
	Key     []byte // key; required (non-empty)
	// Peers are the replicas of the key's partition, as "host:port",
	// self excluded. Each entry is tried at most once, in random order.
	Peers []string
	// Raw asks for the value as stored, skipping the db's decoder
	// (&raw=1).
	Raw bool
}

// Response is a peer's answer. Body is the caller's own: it shares no
// memory with other callers or with the cache.
type Response struct {
	Status       int    // http.StatusOK or http.StatusNotFound
	Body         []byte // the value for a 200; whatever the peer sent with a 404
	Version      string // the peer's X-Spangle-Version: the version that answered
	ContentType  string // the peer's Content-Type, if any
	ETag         string // the peer's ETag, if any
	LastModified string // the peer's Last-Modified, if any
	Peer         string // the peer that answered, "host:port"
	Cached       bool   // served from the hot cache, without asking a peer
}

// Proxy sends lookups for partitions this node does not hold to the
// replicas that do, with sequins' staged backup requests. Identical
// concurrent lookups share one flight of attempts, and answers are kept in
// a bounded hot cache. The zero value is not usable; New makes one. A
// Proxy is safe for concurrent use.
type Proxy struct {
	cfg       Config
	transport *http.Transport
	ownsTrans bool // transport was made by New
	log       *slog.Logger
	m         *metrics
	cache     *cache // nil when off

	randMu sync.Mutex // guards rnd
	rnd    *rand.Rand // nil: the runtime's source

	// base is the parent of every flight's context; stop cancels it when
	// Shutdown runs out of patience.
	base context.Context
	stop context.CancelFunc

	// mu guards flights and closed, and orders group.DoChan calls against
	// the removal of finished or abandoned flights, so that flights and
	// group always hold the same keys. Lock order: mu, then cache.mu.
	mu      sync.Mutex
	flights map[string]*flight
	closed  bool
	group   singleflight.Group
	wg      sync.WaitGroup // running flights, Add under mu while !closed
}

// flight is one coalesced lookup in progress.
type flight struct {
	cancel  context.CancelFunc // abandons the flight
	waiters int                // Gets waiting for it; guarded by Proxy.mu
}

// New returns a Proxy for cfg. It starts nothing: no goroutine runs
// until Get is called. It fails if cfg is invalid or the metrics cannot be
// registered.
func New(cfg Config) (*Proxy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	p := &Proxy{cfg: cfg, transport: cfg.Transport, log: cfg.Logger, m: m, flights: map[string]*flight{}}
	if p.transport == nil {
		p.transport, p.ownsTrans = newTransport(), true
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Rand != nil {
		p.rnd = rand.New(cfg.Rand)
	}
	if cfg.CacheSize > 0 {
		p.cache = newCache(cfg.CacheSize, cfg.CacheBytes)
	}
	p.base, p.stop = context.WithCancel(context.Background())
	return p, nil
}

// newTransport is the default Transport (see Config.Transport).
func newTransport() *http.Transport {
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost:    128,
		IdleConnTimeout:        90 * time.Second,
		DisableCompression:     true,
		MaxResponseHeaderBytes: 64 << 10,
	}
}

// Get asks req.Peers for req.Key and returns the first 200 or 404 (see
// the package doc for the algorithm). It blocks until an answer, Timeout,
// or ctx is done, whichever comes first; when ctx is done it returns
// ctx's error wrapped, and the lookup carries on for any other caller
// sharing it (or is abandoned if there is none). Errors: ErrTimeout,
// ErrNoReplica, ErrClosed, ErrInvalidRequest, or ctx's error.
//
// Get does not modify req, nor retain it after it returns.
func (p *Proxy) Get(ctx context.Context, req Request) (Response, error) {
	if req.DB == "" || req.Version == "" || len(req.Key) == 0 {
		p.m.outcome(outcomeInvalid)
		return Response{}, fmt.Errorf("%w: db %q, version %q, key of %d bytes", ErrInvalidRequest, req.DB, req.Version, len(req.Key))
	}
	key := flightKey(req)
	if p.cache != nil {
		if res, ok := p.cache.get(key); ok {
			p.m.cacheHits.Inc()
			p.m.outcome(statusOutcome(res.Status))
			res.Body, res.Cached = slices.Clone(res.Body), true
			return res, nil
		}
		p.m.cacheMisses.Inc()
	}
	if len(req.Peers) == 0 {
		p.m.outcome(outcomeNoReplica)
		return Response{}, fmt.Errorf("%w: no peer holds the partition", ErrNoReplica)
	}
	if err := ctx.Err(); err != nil {
		p.m.outcome(outcomeCanceled)
		return Response{}, fmt.Errorf("proxy: %w", err)
	}

	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.m.outcome(outcomeClosed)
		return Response{}, ErrClosed
	}
	f, joined := p.flights[key]
	var ch <-chan singleflight.Result
	if joined {
		// flights and group hold the same keys (see mu), so this joins
		// the flight and never calls its function.
		ch = p.group.DoChan(key, func() (any, error) { return nil, fmt.Errorf("proxy: internal: coalesced lookup ran") })
	} else {
		fctx, cancel := context.WithTimeout(p.base, p.cfg.Timeout)
		f = &flight{cancel: cancel}
		p.flights[key] = f
		p.wg.Add(1)
		own := Request{DB: req.DB, Version: req.Version, Key: slices.Clone(req.Key), Peers: slices.Clone(req.Peers), Raw: req.Raw}
		ch = p.group.DoChan(key, func() (any, error) {
			defer p.wg.Done()
			return p.fly(fctx, key, f, own)
		})
	}
	f.waiters++
	p.mu.Unlock()
	if joined {
		p.m.coalesced.Inc()
		if p.cfg.OnCoalesce != nil {
			p.cfg.OnCoalesce()
		}
	}

	select {
	case r := <-ch:
		p.leave(key, f, false)
		if r.Err != nil {
			p.m.outcome(errOutcome(r.Err))
			return Response{}, r.Err
		}
		res := r.Val.(Response)
		if r.Shared || p.cache != nil {
			res.Body = slices.Clone(res.Body)
		}
		p.m.outcome(statusOutcome(res.Status))
		return res, nil
	case <-ctx.Done():
		p.leave(key, f, true)
		p.m.outcome(outcomeCanceled)
		return Response{}, fmt.Errorf("proxy: %w", ctx.Err())
	}
}

// leave records that a Get stopped waiting for f. The last one to give
// up abandons the flight: it is cancelled and forgotten, so that a later
// identical Get starts afresh instead of joining a dying flight.
func (p *Proxy) leave(key string, f *flight, gaveUp bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f.waiters--
	if gaveUp && f.waiters == 0 && p.flights[key] == f {
		f.cancel()
		delete(p.flights, key)
		p.group.Forget(key)
	}
}

// fly runs a flight (in the goroutine singleflight starts for it) and
// returns a Response or an error. Before it returns, the result is cached
// and the flight removed, in that order, so that no identical Get can
// slip between them and ask the peers again.
func (p *Proxy) fly(ctx context.Context, key string, f *flight, req Request) (any, error) {
	defer f.cancel()
	start := time.Now()
	res, err := p.fetch(ctx, req)
	p.m.duration.Observe(time.Since(start).Seconds())
	if err == nil && p.cache != nil {
		p.cache.add(key, res)
	}
	p.mu.Lock()
	if p.flights[key] == f {
		delete(p.flights, key)
		p.group.Forget(key)
	}
	p.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return res, nil
}

// Shutdown stops the Proxy:
//
//  1. Get returns ErrClosed from now on.
//  2. It waits for the lookups in flight, each bounded by Timeout.
//  3. If ctx is done first, it cancels them (their callers get ErrClosed)
//     and waits for their goroutines, which stop promptly.
//  4. It closes the transport's idle connections.
//
// It returns ctx's error if it had to cancel lookups, else nil. It is
// idempotent and safe to call concurrently with Get.
func (p *Proxy) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()

	done := make(chan struct{})
	go func() { // owned: it ends when the flights do, and is waited for below
		p.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		p.stop()
		<-done
	}
	p.stop()
	p.transport.CloseIdleConnections()
	return err
}

// shuffle puts peers in a random order.
func (p *Proxy) shuffle(peers []string) {
	swap := func(i, j int) { peers[i], peers[j] = peers[j], peers[i] }
	if p.rnd == nil {
		rand.Shuffle(len(peers), swap)
		return
	}
	p.randMu.Lock()
	p.rnd.Shuffle(len(peers), swap)
	p.randMu.Unlock()
}

// flightKey identifies a lookup for coalescing and caching: db, version,
// raw and key, length-prefixed so that no two lookups share a key.
func flightKey(req Request) string {
	b := make([]byte, 0, 2*binary.MaxVarintLen64+len(req.DB)+len(req.Version)+1+len(req.Key))
	b = binary.AppendUvarint(b, uint64(len(req.DB)))
	b = append(b, req.DB...)
	b = binary.AppendUvarint(b, uint64(len(req.Version)))
	b = append(b, req.Version...)
	if req.Raw {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = append(b, req.Key...)
	return string(b)
}
