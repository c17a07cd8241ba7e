package edge

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Config configures a Server. Start from DefaultConfig, set Backend, and
// adjust; NewServer calls Validate. Zero durations and sizes are invalid
// rather than "unlimited": every limit is deliberate.
type Config struct {
	// Backend answers lookups and status. Required; no default.
	Backend Backend
	// Batch answers batch lookups (POST /<db>/_batch); *node.Node
	// implements it, as the Backend usually does too. Default nil: batch
	// lookups are 501.
	Batch BatchBackend
	// List answers key listings (GET /<db>/?prefix=…); *node.Node
	// implements it. Default nil: key listings are 501.
	List ListBackend
	// SourceError, when set, says why the node's source cannot be listed
	// ("" when it can): a /readyz that is 503 gives it. Default nil: the
	// 503 says "not ready" only.
	SourceError func() string
	// WatchError, when set, says why the node cannot follow the
	// cluster's buckets ("" when it can; node.Node.WatchError): a /readyz
	// that is 503 gives it. Default nil: not said.
	WatchError func() string
	// NodeName is this node's key in node.VersionStatus.Nodes; /healthz
	// reports the entries under it. Default "localhost" (sequins' name for
	// an unclustered node).
	NodeName string

	// Logger receives request errors (never successes). Default nil: discard.
	Logger *slog.Logger
	// AccessLog, when set, gets a line for every request (accesslog.go);
	// the caller starts it and shuts it down after the Server. Default
	// nil: no access log.
	AccessLog *AccessLog

	// Registerer is where the HTTP metrics are registered. Default nil: a
	// private registry, which /metrics then always exposes too.
	Registerer prometheus.Registerer
	// Gatherer is what /metrics exposes. Default nil: the Registerer, which
	// must then be a Gatherer too (a *prometheus.Registry is), or the
	// private registry when Registerer is nil as well.
	Gatherer prometheus.Gatherer

	// SequinsHeaders also emits X-Sequins-Version and X-Sequins-Proxied-To
	// beside the X-Spangle-* headers, for sequins clients. Default false.
	SequinsHeaders bool

	// CacheTags sends Surrogate-Key ("<db> <db>@<version>") and Cache-Tag
	// ("<db>,<db>@<version>") with lookups' answers, so that a CDN can
	// purge a db, or one version of it, at once. Default false: they
	// cost every answer some 70 bytes, and only a CDN that purges by tag
	// reads them.
	CacheTags bool

	// GzipMinBytes is the size from which values are sent gzip-compressed
	// to clients that accept it (BestSpeed; such answers vary by
	// Accept-Encoding); 0 turns compression off. Default 2048.
	GzipMinBytes int

	// PeerToken, when set, is required (X-Spangle-Peer-Token) of
	// peers' requests: lookups and batches with ?proxy=, which read any
	// version held here and are never proxied again. Others get 403.
	// Default "": anyone may send them.
	PeerToken string

	// PartFiles, when set, serves the partition files of held versions to
	// peers that copy them (GET /<db>/?partfile=<p>&version=<v>, with
	// the peer token; partfile.go); *node.Node implements it. Default
	// nil: such requests are 501.
	PartFiles PartFiles
	// PeerCopyBandwidth bounds the bytes per second of partition files
	// sent to peers, all copies together ([cluster]
	// peer_copy_bandwidth), so that lookups keep their latency. Default
	// 256 MiB/s: a wiped node's share then copies in well under 0.3x its
	// build time, and the sender's GET p99 meanwhile measured no worse
	// than at 128 MiB/s (docs/PERFORMANCE.md, "Peer copy speed").
	PeerCopyBandwidth int64
	// PeerCopyConcurrency bounds the partition files sent at once;
	// further requests are 503 with Retry-After. Default 2.
	PeerCopyConcurrency int

	// ReadHeaderTimeout bounds reading a request's headers (slowloris
	// protection). Default 5s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request. Default 30s.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing a response, from the end of the request
	// headers. Default 30s.
	WriteTimeout time.Duration
	// IdleTimeout bounds how long a keep-alive connection waits for the
	// next request. Default 120s.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request line plus headers. Default 64 KiB.
	MaxHeaderBytes int

	// MaxBatchKeys bounds the keys of one batch lookup (POST
	// /<db>/_batch); more is 413. Default 1000.
	MaxBatchKeys int
	// MaxBatchBytes bounds the body of one batch lookup; more is 413.
	// Default 1 MiB.
	MaxBatchBytes int
	// MaxBatchReplyBytes bounds the values one batch reply carries; a
	// batch that would exceed it stops reading values there and is 413.
	// Default 16 MiB.
	MaxBatchReplyBytes int
	// MaxListKeys is the default and the largest limit of a key listing
	// (GET /<db>/?prefix=…&limit=N): a larger limit is 400. A page is
	// also bounded by MaxBatchReplyBytes of keys and values. Default 1000.
	MaxListKeys int
	// BatchBytesInFlight bounds the bytes of batch requests being read
	// or answered at once, over the whole server: each counts the bytes
	// of its body as they arrive (never what it announces) and twice the reply
	// it may build (the values read, and the encoded reply), reserved
	// 64 KiB first and four times more each time a reply outgrows it, up
	// to MaxBatchReplyBytes. It must hold MaxBatchBytes and twice
	// MaxBatchReplyBytes. Default 64 MiB.
	BatchBytesInFlight int64
	// BatchWait is how long a batch waits for room in BatchBytesInFlight
	// before it is answered 503 with Retry-After. Default 1s.
	BatchWait time.Duration
	// H2MaxResets bounds the RST_STREAM frames one HTTP/2 connection
	// may send within H2ResetWindow; past it the connection gets GOAWAY
	// (ENHANCE_YOUR_CALM) and is closed (HTTP/2 rapid reset,
	// CVE-2023-44487). A client cancels a stream with one, so it bounds
	// cancellations too: 100 a second on average is far above what
	// browsers and API clients send, and caps a flood at about 30 ms of
	// the server's CPU per connection (then a new TLS handshake). Default
	// 1000.
	H2MaxResets int
	// H2ResetWindow is the window of H2MaxResets. Default 10s.
	H2ResetWindow time.Duration
	// TLS, when set, makes Serve speak HTTPS (and HTTP/2, when its
	// NextProtos offer "h2"), typically TLS.ServerConfig. Default nil:
	// plain HTTP.
	TLS *tls.Config

	// MaxConns bounds the connections Serve keeps open at once; further
	// ones wait in the listen backlog. Default: half the process's limit
	// of open files, at most 16384 (1024 when the limit is unknown).
	MaxConns int
}

// DefaultConfig returns a Config with every default set and no Backend.
func DefaultConfig() Config {
	return Config{
		NodeName:           "localhost",
		CacheTags:          false,
		GzipMinBytes:       2048,
		ReadHeaderTimeout:  5 * time.Second,
		ReadTimeout:        30 * time.Second,
		WriteTimeout:       30 * time.Second,
		IdleTimeout:        120 * time.Second,
		MaxHeaderBytes:     64 << 10,
		MaxBatchKeys:       DefaultMaxBatchKeys,
		MaxBatchBytes:      DefaultMaxBatchBytes,
		MaxBatchReplyBytes: 16 << 20,
		MaxListKeys:        1000,
		BatchBytesInFlight: 64 << 20,
		BatchWait:          time.Second,
		H2MaxResets:        1000,
		H2ResetWindow:      10 * time.Second,
		MaxConns:           defaultMaxConns(),

		PeerCopyBandwidth:   256 << 20,
		PeerCopyConcurrency: 2,
	}
}

// Validate reports the first invalid field, wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	switch {
	case c.Backend == nil:
		return fmt.Errorf("%w: Backend is nil", ErrInvalidConfig)
	case c.NodeName == "":
		return fmt.Errorf("%w: NodeName is empty", ErrInvalidConfig)
	case c.PeerCopyBandwidth < partFileChunk:
		return fmt.Errorf("%w: PeerCopyBandwidth %d is below %d bytes a second", ErrInvalidConfig, c.PeerCopyBandwidth, partFileChunk)
	case c.PeerCopyConcurrency < 1:
		return fmt.Errorf("%w: PeerCopyConcurrency %d is not positive", ErrInvalidConfig, c.PeerCopyConcurrency)
	case c.ReadHeaderTimeout <= 0:
		return fmt.Errorf("%w: ReadHeaderTimeout %v is not positive", ErrInvalidConfig, c.ReadHeaderTimeout)
	case c.ReadTimeout <= 0:
		return fmt.Errorf("%w: ReadTimeout %v is not positive", ErrInvalidConfig, c.ReadTimeout)
	case c.WriteTimeout <= 0:
		return fmt.Errorf("%w: WriteTimeout %v is not positive", ErrInvalidConfig, c.WriteTimeout)
	case c.IdleTimeout <= 0:
		return fmt.Errorf("%w: IdleTimeout %v is not positive", ErrInvalidConfig, c.IdleTimeout)
	case c.MaxHeaderBytes <= 0:
		return fmt.Errorf("%w: MaxHeaderBytes %d is not positive", ErrInvalidConfig, c.MaxHeaderBytes)
	case c.GzipMinBytes < 0:
		return fmt.Errorf("%w: GzipMinBytes %d is negative", ErrInvalidConfig, c.GzipMinBytes)
	case c.MaxBatchKeys <= 0:
		return fmt.Errorf("%w: MaxBatchKeys %d is not positive", ErrInvalidConfig, c.MaxBatchKeys)
	case c.MaxBatchBytes <= 0:
		return fmt.Errorf("%w: MaxBatchBytes %d is not positive", ErrInvalidConfig, c.MaxBatchBytes)
	case c.MaxBatchReplyBytes <= 0:
		return fmt.Errorf("%w: MaxBatchReplyBytes %d is not positive", ErrInvalidConfig, c.MaxBatchReplyBytes)
	case c.MaxListKeys <= 0:
		return fmt.Errorf("%w: MaxListKeys %d is not positive", ErrInvalidConfig, c.MaxListKeys)
	case c.BatchBytesInFlight < int64(c.MaxBatchBytes)+2*int64(c.MaxBatchReplyBytes):
		return fmt.Errorf("%w: BatchBytesInFlight %d is below MaxBatchBytes %d plus twice MaxBatchReplyBytes %d",
			ErrInvalidConfig, c.BatchBytesInFlight, c.MaxBatchBytes, c.MaxBatchReplyBytes)
	case c.BatchWait < 0:
		return fmt.Errorf("%w: BatchWait %v is negative", ErrInvalidConfig, c.BatchWait)
	case c.H2MaxResets <= 0:
		return fmt.Errorf("%w: H2MaxResets %d is not positive", ErrInvalidConfig, c.H2MaxResets)
	case c.H2ResetWindow <= 0:
		return fmt.Errorf("%w: H2ResetWindow %v is not positive", ErrInvalidConfig, c.H2ResetWindow)
	case c.MaxConns <= 0:
		return fmt.Errorf("%w: MaxConns %d is not positive", ErrInvalidConfig, c.MaxConns)
	case c.Registerer != nil && c.Gatherer == nil:
		if _, ok := c.Registerer.(prometheus.Gatherer); !ok {
			return fmt.Errorf("%w: Registerer is set and is no Gatherer, but Gatherer is nil", ErrInvalidConfig)
		}
	}
	return nil
}
