package blocks

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"github.com/spangledb/spangle/blocks/parquetin"
)

// openParquet opens a Parquet source file, which is read from its end (the
// footer) and by column: a local file is read in place; any other is first
// copied into a spool file in the version directory, removed on Close.
func (b *builder) openParquet(ctx context.Context, rc io.ReadCloser, br *bufio.Reader, i int, bytes *atomic.Int64) (recordReader, io.Closer, error) {
	name := b.spec.Files[i].Name
	ra, size, closer, err := b.randomAccess(ctx, rc, br, i, bytes)
	if err != nil {
		return nil, closer, err
	}
	pr, err := parquetin.Open(ra, size, name, parquetin.Options{Key: b.spec.KeyField, Value: b.spec.ValueField})
	if err != nil {
		return nil, closer, err
	}
	return parquetReader{pr}, closerFunc(func() error { _ = pr.Close(); return closer.Close() }), nil
}

// parquetReader gives a parquetin.Reader the recordReader's Offset: the
// row.
type parquetReader struct{ *parquetin.Reader }

func (p parquetReader) Offset() int64 { return p.Row() }

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// randomAccess gives file i's content as an io.ReaderAt: rc itself if it
// is a local file, else a spool file holding what br reads. The closer
// closes rc and removes the spool file.
func (b *builder) randomAccess(ctx context.Context, rc io.ReadCloser, br *bufio.Reader, i int, bytes *atomic.Int64) (io.ReaderAt, int64, io.Closer, error) {
	name := b.spec.Files[i].Name
	if f, ok := rc.(*os.File); ok {
		fi, err := f.Stat()
		if err != nil {
			return nil, 0, rc, fmt.Errorf("stat %s: %w", name, err)
		}
		if bytes != nil {
			bytes.Add(fi.Size() - int64(br.Buffered()))
		}
		return f, fi.Size(), rc, nil
	}
	spool, err := os.CreateTemp(b.dir, ".spool-*")
	if err != nil {
		return nil, 0, rc, err
	}
	closer := closerFunc(func() error {
		err := rc.Close()
		_ = spool.Close()
		return errors.Join(err, os.Remove(spool.Name()))
	})
	size, err := io.Copy(spool, &ctxReader{ctx: ctx, r: br})
	if err != nil {
		return nil, 0, closer, fmt.Errorf("read %s: %w", name, err)
	}
	return spool, size, closer, nil
}

// ctxReader stops reading once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
