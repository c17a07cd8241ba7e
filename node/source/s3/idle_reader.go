package s3

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
)

// get sends a GET for key and returns its body. Waiting for the response,
// and then for each Read, is bounded by Config.IdleTimeout: past it the
// request is cancelled and the call fails (a plain, retryable error).
//
// A server that ignores the Range header answers 200 with the whole object;
// the bytes before the range are then skipped here.
func (s *Source) get(ctx context.Context, key string, opts minio.GetObjectOptions) (io.ReadCloser, error) {
	ctx, cancel := context.WithCancel(ctx)
	b := &idleBody{cancel: cancel, timeout: s.cfg.IdleTimeout}
	b.timer = time.AfterFunc(b.timeout, b.expire)
	rc, _, hdr, err := s.core.GetObject(ctx, s.bucket, key, opts)
	b.timer.Stop()
	if err != nil {
		cancel()
		if b.expired.Load() {
			return nil, fmt.Errorf("no response within %v: %w", b.timeout, err)
		}
		return nil, err
	}
	b.rc = rc
	if r := opts.Header().Get("Range"); r != "" && hdr.Get("Content-Range") == "" {
		var start int64
		if _, err := fmt.Sscanf(r, "bytes=%d-", &start); err == nil && start > 0 {
			if _, err := io.CopyN(io.Discard, b, start); err != nil {
				b.Close()
				return nil, fmt.Errorf("skipping to byte %d of a whole-object answer: %w", start, err)
			}
		}
	}
	return b, nil
}

// idleBody is a response body whose reads fail once no byte came for
// timeout. Read and Close are not safe for concurrent use with each other.
type idleBody struct {
	rc      io.ReadCloser
	cancel  context.CancelFunc // cancels the request
	timeout time.Duration
	timer   *time.Timer // armed only during a Read (and the request)
	expired atomic.Bool
}

func (b *idleBody) expire() {
	b.expired.Store(true)
	b.cancel()
}

func (b *idleBody) Read(p []byte) (int, error) {
	b.timer.Reset(b.timeout)
	n, err := b.rc.Read(p)
	b.timer.Stop()
	if err != nil && err != io.EOF && b.expired.Load() {
		err = fmt.Errorf("s3: no data for %v: %w", b.timeout, err)
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.timer.Stop()
	b.cancel()
	return b.rc.Close()
}
