package proxy

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
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
// memory with other callers.
type Response struct {
	Status      int    // http.StatusOK or http.StatusNotFound
	Body        []byte // the value for a 200; whatever the peer sent with a 404
	Version     string // the peer's X-Spangle-Version: the version that answered
	ContentType string // the peer's Content-Type, if any
	// ETag and LastModified are the peer's headers of those names, if
	// any. An answer that came in a batch reply has neither.
	ETag         string
	LastModified string
	Peer         string // the peer that answered, "host:port"
}

// Proxy sends lookups for partitions this node does not hold to the
// replicas that do, with sequins' staged backup requests. Identical
// concurrent lookups share one flight of attempts, and concurrent
// attempts on one peer share requests (batches); the node keeps the
// answers (node's answer cache). The zero value is not usable; New makes one. A Proxy is safe
// for concurrent use.
type Proxy struct {
	cfg Config
	// getHeader and batchHeader are the requests' headers: shared, never
	// modified (they carry the peer token when there is one).
	getHeader, batchHeader http.Header
	transport              *http.Transport
	scheme                 string // of the requests to peers: "http" or "https" (Config.TLS)
	ownsTrans              bool   // transport was made by New
	log                    *slog.Logger
	m                      *metrics

	randMu sync.Mutex // guards rnd
	rnd    *rand.Rand // nil: the runtime's source

	// base is the parent of every request's context; stop cancels it
	// when Shutdown runs out of patience.
	base context.Context
	stop context.CancelFunc

	// mu guards flights, each flight's waiters and closed. It is taken
	// alone: never with a flight's mu.
	mu      sync.Mutex
	flights map[string]*flight
	closed  bool
	running sync.WaitGroup // flights not finished; Add under mu while !closed

	// peersMu guards peers. Lock order: a flight's mu, then peersMu,
	// then a peer's mu.
	peersMu sync.Mutex
	peers   map[string]*peer
	senders sync.WaitGroup // running senders (peer.go)
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
	p := &Proxy{cfg: cfg, transport: cfg.Transport, scheme: "http", log: cfg.Logger, m: m,
		flights: map[string]*flight{}, peers: map[string]*peer{},
		getHeader: getHeader, batchHeader: batchHeader}
	if cfg.PeerToken != "" {
		p.getHeader, p.batchHeader = getHeader.Clone(), batchHeader.Clone()
		p.getHeader[PeerTokenHeader] = []string{cfg.PeerToken}
		p.batchHeader[PeerTokenHeader] = []string{cfg.PeerToken}
	}
	if p.transport == nil {
		p.transport, p.ownsTrans = newTransport(), true
		if cfg.TLS != nil {
			p.transport.DialTLSContext = dialTLS(cfg.TLS)
		}
	}
	if cfg.TLS != nil {
		p.scheme = "https"
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Rand != nil {
		p.rnd = rand.New(cfg.Rand)
	}
	p.base, p.stop = context.WithCancel(context.Background())
	return p, nil
}

// peerDialer dials the made Transport's connections to peers.
var peerDialer = &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}

// newTransport is the default Transport (see Config.Transport).
func newTransport() *http.Transport {
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            peerDialer.DialContext,
		MaxIdleConnsPerHost:    128,
		IdleConnTimeout:        90 * time.Second,
		DisableCompression:     true,
		MaxResponseHeaderBytes: 64 << 10,
	}
}

// dialTLS returns the made Transport's DialTLSContext for Config.TLS:
// each connection is dialled with the configuration conf returns at that
// moment, its ServerName the peer's host unless conf sets one, and is
// returned after its handshake. It offers no ALPN protocol: peers speak
// HTTP/1.1.
func dialTLS(conf func() *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c := conf().Clone()
		if c.ServerName == "" {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			c.ServerName = host
		}
		d := &tls.Dialer{NetDialer: peerDialer, Config: c}
		return d.DialContext(ctx, network, addr)
	}
}

// keyBufs holds the buffers flight keys are built in, so that a lookup
// that joins a flight allocates no key. Buffers over maxPooledKey are
// dropped.
var keyBufs = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledKey = 64 << 10

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
	bp := keyBufs.Get().(*[]byte)
	key := appendFlightKey((*bp)[:0], req)
	defer func() {
		if cap(key) <= maxPooledKey {
			*bp = key[:0]
			keyBufs.Put(bp)
		}
	}()
	if len(req.Peers) == 0 {
		p.m.outcome(outcomeNoReplica)
		return Response{}, fmt.Errorf("%w: no peer holds the partition", ErrNoReplica)
	}
	if err := ctx.Err(); err != nil {
		p.m.outcome(outcomeCanceled)
		return Response{}, fmt.Errorf("proxy: %w", err)
	}

	// Made before taking mu, to keep the critical section short; joining
	// a flight in progress, which wastes it, is the rare case.
	own := p.newFlight(string(key), req)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.m.outcome(outcomeClosed)
		return Response{}, ErrClosed
	}
	f, joined := p.flights[own.key]
	if !joined {
		f = own
		p.flights[f.key] = f
		p.running.Add(1)
	}
	f.waiters++
	p.mu.Unlock()
	if joined {
		p.m.coalesced.Inc()
		if p.cfg.OnCoalesce != nil {
			p.cfg.OnCoalesce()
		}
	} else {
		f.start()
	}

	select {
	case <-f.done:
		if f.err != nil {
			p.m.outcome(errOutcome(f.err))
			return Response{}, f.err
		}
		res := f.res
		if f.shared {
			res.Body = slices.Clone(res.Body)
		}
		p.m.outcome(statusOutcome(res.Status))
		return res, nil
	case <-ctx.Done():
		p.leave(f)
		p.m.outcome(outcomeCanceled)
		return Response{}, fmt.Errorf("proxy: %w", ctx.Err())
	}
}

// leave records that a Get stopped waiting for f before its answer. The
// last one to give up abandons the flight: it is forgotten, so that a
// later identical Get starts afresh instead of joining a dying flight,
// and its attempts are cancelled.
func (p *Proxy) leave(f *flight) {
	p.mu.Lock()
	f.waiters--
	abandon := f.waiters == 0 && p.flights[f.key] == f
	if abandon {
		delete(p.flights, f.key)
	}
	p.mu.Unlock()
	if abandon {
		f.abandon()
	}
}

// settle is a finished flight's last step: the flight is forgotten. It
// returns whether callers must copy the answer's Body: when more than
// one waits.
func (p *Proxy) settle(f *flight) (shared bool) {
	p.mu.Lock()
	if p.flights[f.key] == f {
		delete(p.flights, f.key)
	}
	shared = f.waiters > 1
	p.mu.Unlock()
	return shared
}

// Shutdown stops the Proxy:
//
//  1. Get returns ErrClosed from now on.
//  2. It waits for the lookups in flight, each bounded by Timeout.
//  3. If ctx is done first, it ends them (their callers get ErrClosed),
//     cancels their requests, and waits for the goroutines sending
//     them, which stop promptly.
//  4. It closes the transport's idle connections.
//
// It returns ctx's error if it had to end lookups, else nil. It is
// idempotent and safe to call concurrently with Get.
func (p *Proxy) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()

	done := make(chan struct{})
	go func() { // owned: it ends when the flights do, and is waited for below
		p.running.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		// Cancel the requests first: a sender freed by one failed flight
		// must not get an answer for another before that one fails too.
		p.stop()
		p.mu.Lock()
		flights := make([]*flight, 0, len(p.flights))
		for _, f := range p.flights {
			flights = append(flights, f)
		}
		p.mu.Unlock()
		for _, f := range flights {
			f.fail(ErrClosed)
		}
		<-done
	}
	p.stop()
	p.senders.Wait()
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

// appendFlightKey appends req's flight key to b: what identifies a lookup
// for coalescing (db, version, raw and key), length-prefixed so that no
// two lookups share a key.
func appendFlightKey(b []byte, req Request) []byte {
	b = binary.AppendUvarint(b, uint64(len(req.DB)))
	b = append(b, req.DB...)
	b = binary.AppendUvarint(b, uint64(len(req.Version)))
	b = append(b, req.Version...)
	if req.Raw {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	return append(b, req.Key...)
}
