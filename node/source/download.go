package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/spangledb/spangle/internal/backoff"
)

// DownloadConfig sets the limits of Downloads.
type DownloadConfig struct {
	// Retries is how many times a failed open or read is retried after
	// the last byte delivered; 0 gives up at the first error.
	Retries int
	// Backoff is the first retry's delay, doubling up to BackoffMax,
	// jittered.
	Backoff, BackoffMax time.Duration
	// MaxBandwidth caps the bytes per second read by all downloads
	// together; 0 is unlimited.
	MaxBandwidth int64
	Logger       *slog.Logger          // nil: discard
	Registerer   prometheus.Registerer // nil: metrics are not registered
}

// Downloads reads source files for builds. Every byte goes through one
// node-wide bandwidth limit (DownloadConfig.MaxBandwidth), and a failed open
// or read is retried with exponential backoff, resuming at the offset
// reached: through RangeSource.OpenAt where the source has it, else by
// opening the file again and skipping what was read.
//
// Files stream into the build; nothing is copied to local disk first.
type Downloads struct {
	limit      *rate.Limiter // nil: unlimited
	chunk      int           // the largest read under limit (its burst)
	retries    int
	backoff    time.Duration
	backoffMax time.Duration
	log        *slog.Logger

	bytes   *prometheus.CounterVec // db
	retried *prometheus.CounterVec // db
	failed  *prometheus.CounterVec // db
}

// NewDownloads returns the reader of builds' source files under cfg's
// limits; its metrics (spangle_download_*) are registered with
// cfg.Registerer.
func NewDownloads(cfg DownloadConfig) *Downloads {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Downloads{
		retries:    max(cfg.Retries, 0),
		backoff:    cfg.Backoff,
		backoffMax: cfg.BackoffMax,
		log:        log,
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spangle_download_bytes_total", Help: "Bytes read from the source by builds, by db.",
		}, []string{"db"}),
		retried: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spangle_download_retries_total", Help: "Source file opens or reads retried after an error, by db.",
		}, []string{"db"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spangle_download_failures_total", Help: "Source file downloads given up (permanent error or retries exhausted), by db.",
		}, []string{"db"}),
	}
	if bw := cfg.MaxBandwidth; bw > 0 {
		// A burst of a tenth of a second keeps the rate smooth; reads are cut
		// to it, since the limiter cannot grant more than its burst at once.
		d.chunk = int(min(max(bw/10, 4<<10), 1<<20))
		d.limit = rate.NewLimiter(rate.Limit(bw), d.chunk)
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(d.bytes, d.retried, d.failed)
	}
	return d
}

// Open opens a version's file of src for a build: reads go through the
// limit, and failures are retried, resuming at the byte reached. Its
// retries are added to retries. The file is opened at once, so that one
// that cannot be opened fails the build before any record is read.
func (d *Downloads) Open(ctx context.Context, src Source, db, version string, f SourceFile, retries *atomic.Int64) (io.ReadCloser, error) {
	r := &sourceReader{
		ctx: ctx, d: d, src: src, db: db, version: version, file: f,
		bytes: d.bytes.WithLabelValues(db), retries: retries,
	}
	if err := r.open(); err != nil {
		if err = r.retry(err); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// sourceReader reads one source file, resuming after errors.
type sourceReader struct {
	ctx         context.Context
	d           *Downloads
	src         Source
	db, version string
	file        SourceFile
	bytes       prometheus.Counter
	retries     *atomic.Int64 // the build's count

	rc    io.ReadCloser // nil between a failure and the next open
	off   int64         // bytes delivered so far
	tries int           // retries since the last byte delivered
}

// errShortFile: the source ended a file before its listed size.
var errShortFile = errors.New("file ended before its listed size")

func (r *sourceReader) Read(p []byte) (int, error) {
	for {
		if r.rc == nil {
			if err := r.open(); err != nil {
				if err = r.retry(err); err != nil {
					return 0, err
				}
				continue
			}
		}
		n, err := r.d.read(r.ctx, r.rc, p)
		if n > 0 {
			r.off += int64(n)
			r.tries = 0
			r.bytes.Add(float64(n))
		}
		if r.ctx.Err() != nil {
			return n, r.ctx.Err()
		}
		if err == nil {
			return n, nil
		}
		if err == io.EOF {
			if r.file.Size < 0 || r.off >= r.file.Size {
				return n, io.EOF
			}
			err = fmt.Errorf("%w (byte %d of %d)", errShortFile, r.off, r.file.Size)
		}
		r.rc.Close()
		r.rc = nil
		if n > 0 {
			return n, nil // the error comes back, or not, on the next read
		}
		if err = r.retry(err); err != nil {
			return 0, err
		}
	}
}

// open opens the file at the offset reached.
func (r *sourceReader) open() error {
	if r.off == 0 {
		rc, err := r.src.Open(r.ctx, r.db, r.version, r.file.Name)
		r.rc = rc
		return err
	}
	if rs, ok := r.src.(RangeSource); ok {
		rc, err := rs.OpenAt(r.ctx, r.db, r.version, r.file.Name, r.off)
		r.rc = rc
		return err
	}
	rc, err := r.src.Open(r.ctx, r.db, r.version, r.file.Name)
	if err != nil {
		return err
	}
	skip := io.Reader(rc)
	if r.d.limit != nil {
		skip = &limitedReader{ctx: r.ctx, r: rc, d: r.d}
	}
	skipped, err := io.CopyN(io.Discard, skip, r.off)
	r.bytes.Add(float64(skipped))
	if err != nil {
		rc.Close()
		if err == io.EOF {
			err = fmt.Errorf("%w (byte %d of %d, resuming at %d)", errShortFile, skipped, r.file.Size, r.off)
		}
		return err
	}
	r.rc = rc
	return nil
}

// retry waits before the next attempt after err, or returns the error that
// ends the download: the context's end, a permanent error, or err once the
// retries are spent.
func (r *sourceReader) retry(err error) error {
	path := r.src.Path(r.db, r.version) + "/" + r.file.Name
	if r.ctx.Err() != nil {
		return r.ctx.Err()
	}
	if errors.Is(err, ErrPermanent) || errors.Is(err, fs.ErrNotExist) {
		r.d.failed.WithLabelValues(r.db).Inc()
		return fmt.Errorf("download %s: %w", path, err)
	}
	if r.tries >= r.d.retries {
		r.d.failed.WithLabelValues(r.db).Inc()
		return fmt.Errorf("download %s: giving up after %d retries: %w", path, r.tries, err)
	}
	r.tries++
	r.retries.Add(1)
	delay := min(r.d.backoff<<(r.tries-1), r.d.backoffMax)
	if delay <= 0 { // the shift overflowed
		delay = r.d.backoffMax
	}
	delay = backoff.Jitter(delay) // nodes retrying together spread out
	r.d.retried.WithLabelValues(r.db).Inc()
	r.d.log.Warn("source read failed; retrying", "db", r.db, "version", r.version, "file", r.file.Name,
		"offset", r.off, "retry", r.tries, "of", r.d.retries, "delay", delay, "err", err)
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-r.ctx.Done():
		return r.ctx.Err()
	}
}

func (r *sourceReader) Close() error {
	if r.rc == nil {
		return nil
	}
	err := r.rc.Close()
	r.rc = nil
	return err
}

// limitedReader reads through the download limit.
type limitedReader struct {
	ctx context.Context
	r   io.Reader
	d   *Downloads
}

func (l *limitedReader) Read(p []byte) (int, error) { return l.d.read(l.ctx, l.r, p) }

// read reads from rd into p through the limit, if any: at most one burst
// at a time, then it waits until the bytes read are allowed. A wait cut
// short by ctx's end returns ctx's error.
func (d *Downloads) read(ctx context.Context, rd io.Reader, p []byte) (int, error) {
	if d.limit != nil && len(p) > d.chunk {
		p = p[:d.chunk]
	}
	n, err := rd.Read(p)
	if n > 0 && d.limit != nil {
		if werr := d.limit.WaitN(ctx, n); werr != nil && ctx.Err() != nil {
			return n, ctx.Err()
		}
	}
	return n, err
}
