// Package parquetin reads key-value records from Parquet files: one column
// holds the keys, another the values, read row group by row group and page
// by page, so that memory holds one page of each column at a time.
package parquetin

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// Magic is the first (and last) four bytes of a Parquet file.
const Magic = "PAR1"

// Default column names.
const (
	DefaultKey   = "key"
	DefaultValue = "value"
)

// Options name the columns read. A nested column is named by its path with
// dots ("a.b"). "" means the default.
type Options struct {
	Key, Value string
	// MaxPage bounds the size of each page of the key and value columns,
	// compressed and not: a file with a larger one is refused (Open), so
	// that a reader's pages decoded at once stay within a caller's memory
	// budget. 0 or more than MaxPageSize means MaxPageSize.
	MaxPage int64
}

// ErrFormat is wrapped by every error about a file's content.
var ErrFormat = errors.New("parquetin: bad parquet input")

// Error reports a file that cannot be read, naming the file, the row (-1
// when before any row) and the reason. errors.Is(err, ErrFormat) is true.
type Error struct {
	File string
	Row  int64
	Err  error
}

func (e *Error) Error() string {
	if e.Row < 0 {
		return fmt.Sprintf("parquet file %s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("parquet file %s: row %d: %v", e.File, e.Row, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrFormat) true.
func (e *Error) Is(target error) bool { return target == ErrFormat }

// Reader reads the records of one Parquet file in order. It is not safe for
// concurrent use.
type Reader struct {
	name       string
	file       *parquet.File
	groups     []parquet.RowGroup
	group      int   // index of the row group being read
	left       int64 // rows left in it
	key, value column
	row        int64
	err        error
	k, v       []byte
}

// Open reads the footer of the Parquet file r (size bytes, named name in
// errors) and checks that its key and value columns exist and hold
// storable types.
func Open(r io.ReaderAt, size int64, name string, opts Options) (rd *Reader, err error) {
	defer func() {
		if p := recover(); p != nil { // the library's, on a file it did not expect
			rd, err = nil, &Error{File: name, Row: -1, Err: fmt.Errorf("malformed file: %v", p)}
		}
	}()
	if opts.Key == "" {
		opts.Key = DefaultKey
	}
	if opts.Value == "" {
		opts.Value = DefaultValue
	}
	fail := func(err error) (*Reader, error) { return nil, &Error{File: name, Row: -1, Err: err} }
	if size < 12 {
		return fail(fmt.Errorf("%d bytes: too short for a parquet file", size))
	}
	f, err := parquet.OpenFile(r, size,
		parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true), parquet.ReadBufferSize(64<<10))
	if err != nil {
		return fail(err)
	}
	rd = &Reader{name: name, file: f, groups: f.RowGroups(), group: -1}
	if rd.key, err = lookup(f, "key", opts.Key); err != nil {
		return fail(err)
	}
	if rd.value, err = lookup(f, "value", opts.Value); err != nil {
		return fail(err)
	}
	maxPage := int64(MaxPageSize)
	if opts.MaxPage > 0 {
		maxPage = min(opts.MaxPage, maxPage)
	}
	if err := checkChunks(f, size, rd.key.index, rd.value.index, r, maxPage); err != nil {
		return fail(err)
	}
	return rd, nil
}

// lookup finds a column by its dotted path and checks its type.
func lookup(f *parquet.File, role, path string) (column, error) {
	leaf, ok := f.Schema().Lookup(strings.Split(path, ".")...)
	if !ok || !leaf.Node.Leaf() {
		return column{}, fmt.Errorf("no %s column %q (columns: %s)", role, path, columnNames(f))
	}
	if leaf.MaxRepetitionLevel > 0 {
		return column{}, fmt.Errorf("%s column %q is repeated: want one value per row", role, path)
	}
	kind := leaf.Node.Type().Kind()
	switch kind {
	case parquet.ByteArray, parquet.FixedLenByteArray, parquet.Int32, parquet.Int64,
		parquet.Float, parquet.Double, parquet.Boolean:
	default:
		return column{}, fmt.Errorf("%s column %q has type %s: want a byte array, a string, an integer, a float or a boolean", role, path, kind)
	}
	return column{role: role, path: path, index: leaf.ColumnIndex, buf: make([]parquet.Value, 0, 512)}, nil
}

func columnNames(f *parquet.File) string {
	var names []string
	for _, p := range f.Schema().Columns() {
		names = append(names, strings.Join(p, "."))
		if len(names) == 20 {
			names = append(names, "…")
			break
		}
	}
	return strings.Join(names, ", ")
}

// checkChunks refuses column chunks outside the file, and pages of the
// key and value columns that checkChunk refuses, before any is read.
func checkChunks(f *parquet.File, size int64, key, value int, r io.ReaderAt, maxPage int64) error {
	rows := int64(0)
	for i, rg := range f.Metadata().RowGroups {
		if rg.NumRows < 0 || rg.NumRows > math.MaxInt64-rows {
			return fmt.Errorf("row group %d: %d rows", i, rg.NumRows)
		}
		rows += rg.NumRows
		for j, c := range rg.Columns {
			md := c.MetaData
			start := md.DataPageOffset
			if md.DictionaryPageOffset > 0 && md.DictionaryPageOffset < start {
				start = md.DictionaryPageOffset
			}
			if start < 4 || md.TotalCompressedSize < 0 || start > size || md.TotalCompressedSize > size-start {
				return fmt.Errorf("row group %d, column %d: chunk at offset %d of %d bytes is outside the file of %d bytes",
					i, j, start, md.TotalCompressedSize, size)
			}
			if j == key || j == value {
				if md.NumValues != rg.NumRows {
					return fmt.Errorf("row group %d, column %q: %d values in %d rows", i, strings.Join(md.PathInSchema, "."), md.NumValues, rg.NumRows)
				}
				if err := checkChunk(r, &md, start, maxPage); err != nil {
					return fmt.Errorf("row group %d, column %q: %w", i, strings.Join(md.PathInSchema, "."), err)
				}
			}
		}
	}
	if rows != f.NumRows() {
		return fmt.Errorf("row groups hold %d rows, the footer says %d", rows, f.NumRows())
	}
	return nil
}

// column streams the values of one column of the current row group.
type column struct {
	role, path string
	index      int
	pages      parquet.Pages
	values     parquet.ValueReader // of the current page; nil before the first
	buf        []parquet.Value     // values read from it
	pos        int
	scratch    [8]byte
}

// start begins the column's chunk of row group rg.
func (c *column) start(rg parquet.RowGroup) {
	c.close()
	c.pages = rg.ColumnChunks()[c.index].Pages()
}

func (c *column) close() {
	if c.pages != nil {
		_ = c.pages.Close()
	}
	c.pages, c.values, c.buf, c.pos = nil, nil, c.buf[:0], 0
}

// next returns the column's next value, encoded as bytes; null is nil. The
// bytes are valid until the next call.
func (c *column) next() (b []byte, null bool, err error) {
	for c.pos == len(c.buf) {
		if c.values != nil {
			n, err := c.values.ReadValues(c.buf[:cap(c.buf)])
			c.buf, c.pos = c.buf[:n], 0
			if n > 0 {
				break
			}
			if err != nil && err != io.EOF {
				return nil, false, fmt.Errorf("column %q: %w", c.path, err)
			}
			c.values = nil
		}
		if c.pages == nil {
			return nil, false, fmt.Errorf("column %q: fewer values than rows", c.path)
		}
		p, err := c.pages.ReadPage()
		if err == io.EOF {
			return nil, false, fmt.Errorf("column %q: fewer values than rows", c.path)
		}
		if err != nil {
			return nil, false, fmt.Errorf("column %q: %w", c.path, err)
		}
		c.values = p.Values()
	}
	v := c.buf[c.pos]
	c.pos++
	if v.IsNull() {
		return nil, true, nil
	}
	return c.encode(v)
}

// encode gives a value's bytes: byte arrays as they are, numbers big-endian
// as Hadoop's Writables serialize them (IntWritable, LongWritable,
// FloatWritable, DoubleWritable), a boolean as one byte 0 or 1.
func (c *column) encode(v parquet.Value) ([]byte, bool, error) {
	s := c.scratch[:]
	switch v.Kind() {
	case parquet.ByteArray, parquet.FixedLenByteArray:
		return v.ByteArray(), false, nil
	case parquet.Int32:
		binary.BigEndian.PutUint32(s, uint32(v.Int32()))
		return s[:4], false, nil
	case parquet.Int64:
		binary.BigEndian.PutUint64(s, uint64(v.Int64()))
		return s[:8], false, nil
	case parquet.Float:
		binary.BigEndian.PutUint32(s, math.Float32bits(v.Float()))
		return s[:4], false, nil
	case parquet.Double:
		binary.BigEndian.PutUint64(s, math.Float64bits(v.Double()))
		return s[:8], false, nil
	case parquet.Boolean:
		s[0] = 0
		if v.Boolean() {
			s[0] = 1
		}
		return s[:1], false, nil
	}
	return nil, false, fmt.Errorf("column %q: value of type %s", c.path, v.Kind())
}

// Next reads the next record; false at the end or on an error (Err).
func (r *Reader) Next() (ok bool) {
	if r.err != nil {
		return false
	}
	defer func() {
		if p := recover(); p != nil { // the library's, on a page it did not expect
			r.err = &Error{File: r.name, Row: r.row, Err: fmt.Errorf("malformed page: %v", p)}
			ok = false
		}
	}()
	for r.left == 0 {
		r.group++
		if r.group >= len(r.groups) {
			r.key.close()
			r.value.close()
			return false
		}
		rg := r.groups[r.group]
		r.left = rg.NumRows()
		r.key.start(rg)
		r.value.start(rg)
	}
	k, null, err := r.key.next()
	if err == nil && null {
		err = errors.New("null key")
	}
	if err != nil {
		r.err = &Error{File: r.name, Row: r.row, Err: err}
		return false
	}
	r.k = k
	v, _, err := r.value.next() // a null value is stored empty
	if err != nil {
		r.err = &Error{File: r.name, Row: r.row, Err: err}
		return false
	}
	r.v = v
	r.left--
	r.row++
	return true
}

// Key is the current record's key, valid until the next call to Next.
func (r *Reader) Key() []byte { return r.k }

// Value is the current record's value, valid until the next call to Next.
func (r *Reader) Value() []byte { return r.v }

// Err is the error that stopped Next, nil at the end of the file.
func (r *Reader) Err() error { return r.err }

// Row is the number of records read.
func (r *Reader) Row() int64 { return r.row }

// NumRows is the file's number of rows, from its footer.
func (r *Reader) NumRows() int64 { return r.file.NumRows() }

// Close releases the pages being read; it does not close the input.
func (r *Reader) Close() error {
	r.key.close()
	r.value.close()
	return nil
}
