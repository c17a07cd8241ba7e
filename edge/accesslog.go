package edge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// An access log is one line per request answered, in the Combined Log
// Format or as JSON lines (accesslog_format.go), appended to a file or
// written to standard output. A request formats its line itself and
// copies it into a bounded buffer under a short lock; one goroutine
// writes the buffer out, so a slow, full or unwritable file never
// blocks or fails a request: a line that finds the buffer full is
// dropped and counted (spangle_access_log_dropped_total), as are the
// lines of a write that failed, and the error is logged at most once per
// AccessLogConfig.ErrorInterval.
//
// The file is opened with O_APPEND, so that logrotate's copytruncate
// leaves no hole of zeros: every write lands at the file's end, wherever
// it is now. Reopen (spangle serve calls it on SIGHUP) opens the path
// again for logrotate's rename-then-signal rotation; lines queued before
// the reopen go to the old file, later ones to the new.

// Access log formats (AccessLogConfig.Format).
const (
	AccessLogCombined = "combined"
	AccessLogJSON     = "json"
)

// AccessLogConfig configures an AccessLog. Start from
// DefaultAccessLogConfig and set Path; NewAccessLog calls Validate.
type AccessLogConfig struct {
	// Path is the file lines are appended to (created 0640 if missing),
	// or "-" for standard output. Default "": no access log.
	Path string
	// Format is AccessLogCombined (the Combined Log Format, followed by
	// spangle's own fields as key=value) or AccessLogJSON (one JSON
	// object a line). Default "combined".
	Format string
	// TrustedProxies are the networks of the proxies whose
	// X-Forwarded-For names the client: for a request from one of them,
	// the client is the right-most address of X-Forwarded-For that is not
	// a trusted proxy itself. For any other peer the header is ignored.
	// Default none: the client is always the connection's peer.
	TrustedProxies []netip.Prefix
	// BufferBytes bounds the lines waiting to be written; a line that
	// would pass it is dropped and counted. Default 4 MiB.
	BufferBytes int
	// FlushInterval is how long lines may wait to be written while fewer
	// than a quarter of BufferBytes are waiting (more are written at
	// once). Default 100ms.
	FlushInterval time.Duration
	// ErrorInterval is the least time between two log records of failed
	// writes or reopens (the drops are counted meanwhile). Default 1m.
	ErrorInterval time.Duration

	// Logger receives write and reopen errors. Default nil: discard.
	Logger *slog.Logger
	// Registerer is where the access log's metrics are registered.
	// Default nil: a private registry.
	Registerer prometheus.Registerer
}

// DefaultAccessLogConfig returns an AccessLogConfig with every default
// set and no Path (off).
func DefaultAccessLogConfig() AccessLogConfig {
	return AccessLogConfig{
		Format:        AccessLogCombined,
		BufferBytes:   4 << 20,
		FlushInterval: 100 * time.Millisecond,
		ErrorInterval: time.Minute,
	}
}

// Validate reports the first invalid field, wrapping ErrInvalidConfig.
func (c AccessLogConfig) Validate() error {
	switch {
	case c.Path == "":
		return fmt.Errorf("%w: access log Path is empty", ErrInvalidConfig)
	case c.Format != AccessLogCombined && c.Format != AccessLogJSON:
		return fmt.Errorf("%w: access log Format %q is neither %q nor %q", ErrInvalidConfig, c.Format, AccessLogCombined, AccessLogJSON)
	case c.BufferBytes < 4<<10:
		return fmt.Errorf("%w: access log BufferBytes %d is below 4 KiB", ErrInvalidConfig, c.BufferBytes)
	case c.FlushInterval <= 0:
		return fmt.Errorf("%w: access log FlushInterval %v is not positive", ErrInvalidConfig, c.FlushInterval)
	case c.ErrorInterval <= 0:
		return fmt.Errorf("%w: access log ErrorInterval %v is not positive", ErrInvalidConfig, c.ErrorInterval)
	}
	return nil
}

// AccessLog writes access log lines. Create it with NewAccessLog, then
// Start, and Shutdown when the doors that use it have stopped; give it
// to the doors (Config.AccessLog, NATSConfig.AccessLog, Handler). Safe
// for concurrent use.
type AccessLog struct {
	cfg      AccessLogConfig
	json     bool
	log      *slog.Logger
	name     string // the log label of the metrics
	trusted  []netip.Prefix
	stamp    atomic.Pointer[logStamp] // of the second logged last
	dropped  prometheus.Counter       // spangle_access_log_dropped_total{log}
	written  prometheus.Counter       // spangle_access_log_lines_total{log}
	failures prometheus.Counter       // spangle_access_log_errors_total{log}

	mu  sync.Mutex // guards buf and reopenAt
	buf []byte     // lines waiting, whole lines only
	// reopenAt is len(buf) when Reopen was called: the lines before it
	// go to the old file, the rest to the new one; -1 when no reopen is
	// pending.
	reopenAt int
	wake     chan struct{}
	ctl      chan chan struct{} // a Flush: closed once what was queued is written
	reopen   chan struct{}      // cap 1: wakes the writer for a reopen
	quit     chan struct{}      // closed by Shutdown
	done     chan struct{}      // closed when the writer has returned
	started  sync.Once
	stopped  sync.Once

	// The writer goroutine's own.
	f         *os.File
	lastError time.Time
}

// NewAccessLog validates cfg, opens its file (an error if it cannot be
// opened for appending), and registers the metrics, labelled
// log=name ("http", "nats"). It starts nothing.
func NewAccessLog(cfg AccessLogConfig, name string) (*AccessLog, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := &AccessLog{
		cfg:      cfg,
		json:     cfg.Format == AccessLogJSON,
		log:      cfg.Logger,
		name:     name,
		trusted:  cfg.TrustedProxies,
		wake:     make(chan struct{}, 1),
		reopenAt: -1,
		ctl:      make(chan chan struct{}),
		reopen:   make(chan struct{}, 1),
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	reg := cfg.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	counter := func(metric, help string) (prometheus.Counter, error) {
		v, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: metric, Help: help}, []string{"log"}))
		if err != nil {
			return nil, err
		}
		return v.WithLabelValues(name), nil
	}
	var err error
	if l.dropped, err = counter("spangle_access_log_dropped_total",
		"Access log lines dropped: the buffer was full (the file is slow or unwritable) or their write failed, by log (http, nats)."); err != nil {
		return nil, err
	}
	if l.written, err = counter("spangle_access_log_lines_total", "Access log lines written, by log (http, nats)."); err != nil {
		return nil, err
	}
	if l.failures, err = counter("spangle_access_log_errors_total", "Failed writes and reopens of the access log, by log (http, nats)."); err != nil {
		return nil, err
	}
	if l.f, err = l.open(); err != nil {
		return nil, err
	}
	return l, nil
}

// open opens the configured path for appending (standard output for "-").
func (l *AccessLog) open() (*os.File, error) {
	if l.cfg.Path == "-" {
		return os.Stdout, nil
	}
	f, err := os.OpenFile(l.cfg.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("edge: access log: %w", err)
	}
	return f, nil
}

// Start starts the writer. Lines added before it wait in the buffer.
func (l *AccessLog) Start() {
	l.started.Do(func() { go l.run() })
}

// Reopen makes the writer open the path again, for log rotation
// (spangle serve: SIGHUP): the lines added before Reopen returns go to
// the old file, those added after it to the new one. It does not wait
// for the writer. If the path cannot be opened, the error is logged and
// the old file kept.
func (l *AccessLog) Reopen() {
	l.mu.Lock()
	if l.reopenAt < 0 {
		l.reopenAt = len(l.buf)
	}
	l.mu.Unlock()
	select {
	case l.reopen <- struct{}{}:
	default: // the writer is woken already
	}
}

// Flush waits until the lines added before it are written or dropped,
// or ctx ends. It needs Start.
func (l *AccessLog) Flush(ctx context.Context) error {
	ch := make(chan struct{})
	select {
	case l.ctl <- ch:
	case <-l.done:
		return errors.New("edge: access log shut down")
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown writes the lines queued, closes the file and stops the
// writer; idempotent. If ctx ends first (a write hangs), it returns ctx's
// error and the writer finishes on its own. Lines added after it are
// dropped.
func (l *AccessLog) Shutdown(ctx context.Context) error {
	l.stopped.Do(func() {
		l.Start() // so that done closes
		close(l.quit)
	})
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// add queues line, a whole line ending in '\n'; it never blocks on the
// file. The caller keeps line.
func (l *AccessLog) add(line []byte) {
	l.mu.Lock()
	n := len(l.buf)
	if n+len(line) > l.cfg.BufferBytes {
		l.mu.Unlock()
		l.dropped.Inc()
		return
	}
	l.buf = append(l.buf, line...)
	l.mu.Unlock()
	// Wake the writer when the first line arrives (it then waits up to
	// FlushInterval for more) and when a quarter of the buffer is full.
	if q := l.cfg.BufferBytes / 4; n == 0 || (n < q && n+len(line) >= q) {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// run is the writer: it writes what is queued when woken and the buffer
// is a quarter full, or FlushInterval after the first line, and serves
// Reopen, Flush and Shutdown.
func (l *AccessLog) run() {
	defer close(l.done)
	var spare []byte
	timer := time.NewTimer(l.cfg.FlushInterval)
	timer.Stop()
	armed := false
	for {
		select {
		case <-l.wake:
			if !armed && !l.pastQuarter() {
				timer.Reset(l.cfg.FlushInterval)
				armed = true
				continue
			}
		case <-timer.C:
		case <-l.reopen: // writeOut below reopens
		case ch := <-l.ctl:
			spare = l.writeOut(spare)
			close(ch)
		case <-l.quit:
			timer.Stop()
			l.writeOut(spare)
			if l.f != os.Stdout {
				l.f.Close()
			}
			return
		}
		if armed {
			timer.Stop()
			armed = false
		}
		spare = l.writeOut(spare)
	}
}

// pastQuarter reports whether a quarter of the buffer is queued.
func (l *AccessLog) pastQuarter() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buf) >= l.cfg.BufferBytes/4
}

// writeOut swaps the queued lines for spare (emptied) and writes them,
// reopening the file where Reopen asked; it returns the buffer to swap
// in next time.
func (l *AccessLog) writeOut(spare []byte) []byte {
	l.mu.Lock()
	out, at := l.buf, l.reopenAt
	l.buf, l.reopenAt = spare[:0], -1
	l.mu.Unlock()
	if at >= 0 {
		l.writeLines(out[:at])
		l.reopenFile()
		l.writeLines(out[at:])
	} else {
		l.writeLines(out)
	}
	if cap(out) > l.cfg.BufferBytes {
		out = nil // grown past the bound by one long line: do not keep it
	}
	return out
}

// writeLines writes whole lines to the file; the lines of a failed
// write are dropped and counted.
func (l *AccessLog) writeLines(out []byte) {
	if len(out) == 0 {
		return
	}
	n, err := l.f.Write(out)
	lines := bytes.Count(out, newline)
	if err != nil {
		// The lines written whole count as written, the rest as dropped.
		ok := bytes.Count(out[:n], newline)
		l.written.Add(float64(ok))
		l.dropped.Add(float64(lines - ok))
		l.fail("edge: access log write failed; lines dropped", err, slog.Int("dropped", lines-ok))
		return
	}
	l.written.Add(float64(lines))
}

var newline = []byte{'\n'}

// reopenFile opens the path again and closes the old file; on failure
// the old file is kept.
func (l *AccessLog) reopenFile() {
	if l.cfg.Path == "-" {
		return
	}
	f, err := l.open()
	if err != nil {
		l.fail("edge: access log reopen failed; writing to the old file", err)
		return
	}
	l.f.Close()
	l.f = f
}

// fail counts a failed write or reopen and logs it, unless one was
// logged less than ErrorInterval ago.
func (l *AccessLog) fail(msg string, err error, attrs ...slog.Attr) {
	l.failures.Inc()
	now := time.Now()
	if !l.lastError.IsZero() && now.Sub(l.lastError) < l.cfg.ErrorInterval {
		return
	}
	l.lastError = now
	l.log.LogAttrs(context.Background(), slog.LevelError, msg,
		append(attrs, slog.String("path", l.cfg.Path), slog.Any("err", err))...)
}
