package blocks

import (
	"bufio"
	"context"
	"encoding/binary"
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
	if head, _ := br.Peek(4); string(head) != parquetin.Magic { // before a spool copies it all
		return nil, rc, &parquetin.Error{File: name, Row: -1, Err: fmt.Errorf("not a parquet file: first bytes %q", head)}
	}
	ra, size, closer, err := b.randomAccess(ctx, rc, br, i, bytes)
	if err != nil {
		return nil, closer, err
	}
	pr, err := parquetin.Open(ra, size, name, parquetin.Options{Key: b.spec.KeyField, Value: b.spec.ValueField, MaxPage: b.parquetMaxPage()})
	if err != nil {
		return nil, closer, err
	}
	return parquetReader{pr}, closerFunc(func() error { _ = pr.Close(); return closer.Close() }), nil
}

// parquetMaxPage bounds the pages of the Parquet files loaded: a load
// holds a page of each column, compressed and decoded, and the
// dictionaries of both; a quarter of its share of half the budget (as a
// SequenceFile load's, see seqfileOptions) keeps them within that share,
// but no less than parquetMinPage. The default budget admits pages of
// 8 MiB (writers' default is 1 MiB).
func (b *builder) parquetMaxPage() int64 {
	return max(b.opts.MemoryBudget/2/int64(max(b.opts.MaxParallelLoads, 1))/4, parquetMinPage)
}

// parquetMinPage is the page size always admitted, whatever the budget.
const parquetMinPage = 1 << 20

// parquetReader gives a parquetin.Reader the recordReader's Offset: the
// row.
type parquetReader struct{ *parquetin.Reader }

func (p parquetReader) Offset() int64 { return p.Row() }

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// randomAccess gives file i's content as an io.ReaderAt: the file itself
// if rc or the file's OpenAt gives an *os.File, else a spool file holding
// what br reads, once the file's last bytes are those of a Parquet file.
// The closer closes what was opened and removes the spool file.
func (b *builder) randomAccess(ctx context.Context, rc io.ReadCloser, br *bufio.Reader, i int, bytes *atomic.Int64) (io.ReaderAt, int64, io.Closer, error) {
	sf := b.spec.Files[i]
	if _, ok := rc.(*os.File); !ok && sf.OpenAt != nil {
		if at, err := sf.OpenAt(ctx, 0); err == nil {
			if _, ok := at.(*os.File); ok {
				_ = rc.Close()
				rc, br = at, nil
			} else {
				_ = at.Close()
			}
		}
	}
	if f, ok := rc.(*os.File); ok {
		fi, err := f.Stat()
		if err != nil {
			return nil, 0, rc, fmt.Errorf("stat %s: %w", sf.Name, err)
		}
		if bytes != nil {
			read := int64(0)
			if br != nil {
				read = int64(br.Buffered())
			}
			bytes.Add(fi.Size() - read)
		}
		return f, fi.Size(), rc, nil
	}
	if err := checkParquetTail(ctx, sf); err != nil {
		return nil, 0, rc, err
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
		return nil, 0, closer, fmt.Errorf("read %s: %w", sf.Name, err)
	}
	return spool, size, closer, nil
}

// checkParquetTail reads a file's last 8 bytes, where it can: a Parquet
// file ends with its footer's length and "PAR1". A file that does not
// (a truncated one, or gigabytes of zeros behind a first "PAR1") is
// refused before it is copied.
func checkParquetTail(ctx context.Context, sf SourceFile) error {
	if sf.OpenAt == nil || sf.Size < 0 {
		return nil
	}
	fail := func(err error) error { return &parquetin.Error{File: sf.Name, Row: -1, Err: err} }
	if sf.Size < 12 {
		return fail(fmt.Errorf("%d bytes: too short for a parquet file", sf.Size))
	}
	rc, err := sf.OpenAt(ctx, sf.Size-8)
	if err != nil {
		return fmt.Errorf("open %s: %w", sf.Name, err)
	}
	defer rc.Close()
	var tail [8]byte
	if _, err := io.ReadFull(rc, tail[:]); err != nil {
		return fmt.Errorf("read %s: %w", sf.Name, err)
	}
	if string(tail[4:]) != parquetin.Magic {
		return fail(fmt.Errorf("invalid magic footer of parquet file: %q", tail[4:]))
	}
	if n := int64(binary.LittleEndian.Uint32(tail[:4])); n > sf.Size-12 {
		return fail(fmt.Errorf("footer of %d bytes in a file of %d", n, sf.Size))
	}
	return nil
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
