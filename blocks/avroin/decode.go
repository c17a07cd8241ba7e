package avroin

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/hamba/avro/v2"
)

// maxDepth bounds the nesting of values skipped (recursive schemas).
const maxDepth = 100

var errShort = errors.New("record ends before its fields")

// decoder reads Avro's binary encoding from a block.
type decoder struct {
	b   []byte
	pos int
}

func (d *decoder) left() int { return len(d.b) - d.pos }

func (d *decoder) long() (int64, error) {
	var u uint64
	for shift := uint(0); ; shift += 7 {
		if shift >= 64 {
			return 0, errors.New("varint longer than 10 bytes")
		}
		if d.pos >= len(d.b) {
			return 0, errShort
		}
		c := d.b[d.pos]
		d.pos++
		u |= uint64(c&0x7f) << shift
		if c < 0x80 {
			break
		}
	}
	return int64(u>>1) ^ -int64(u&1), nil
}

func (d *decoder) take(n int64) ([]byte, error) {
	if n < 0 || n > int64(d.left()) {
		return nil, fmt.Errorf("%d bytes where %d are left: %w", n, d.left(), errShort)
	}
	b := d.b[d.pos : d.pos+int(n) : d.pos+int(n)]
	d.pos += int(n)
	return b, nil
}

// value reads a key or value field (a type checkType accepts): bytes,
// strings and fixed as they are, numbers big-endian as Hadoop's Writables
// serialize them (into s), a boolean as one byte 0 or 1; null as null.
func (d *decoder) value(t avro.Schema, s []byte) ([]byte, bool, error) {
	switch t.Type() {
	case avro.Null:
		return nil, true, nil
	case avro.Bytes, avro.String:
		n, err := d.long()
		if err != nil {
			return nil, false, err
		}
		b, err := d.take(n)
		return b, false, err
	case avro.Fixed:
		b, err := d.take(int64(t.(*avro.FixedSchema).Size()))
		return b, false, err
	case avro.Int:
		n, err := d.long()
		if err == nil && (n < math.MinInt32 || n > math.MaxInt32) {
			err = fmt.Errorf("int %d out of range", n)
		}
		binary.BigEndian.PutUint32(s, uint32(int32(n)))
		return s[:4], false, err
	case avro.Long:
		n, err := d.long()
		binary.BigEndian.PutUint64(s, uint64(n))
		return s[:8], false, err
	case avro.Float:
		b, err := d.take(4)
		if err != nil {
			return nil, false, err
		}
		binary.BigEndian.PutUint32(s, binary.LittleEndian.Uint32(b))
		return s[:4], false, nil
	case avro.Double:
		b, err := d.take(8)
		if err != nil {
			return nil, false, err
		}
		binary.BigEndian.PutUint64(s, binary.LittleEndian.Uint64(b))
		return s[:8], false, nil
	case avro.Boolean:
		b, err := d.take(1)
		if err != nil {
			return nil, false, err
		}
		if b[0] > 1 {
			return nil, false, fmt.Errorf("boolean byte %d", b[0])
		}
		s[0] = b[0]
		return s[:1], false, nil
	case avro.Union:
		br, err := d.branch(t.(*avro.UnionSchema))
		if err != nil {
			return nil, false, err
		}
		return d.value(br, s)
	}
	return nil, false, fmt.Errorf("type %s", t.Type())
}

func (d *decoder) branch(u *avro.UnionSchema) (avro.Schema, error) {
	i, err := d.long()
	if err != nil {
		return nil, err
	}
	types := u.Types()
	if i < 0 || i >= int64(len(types)) {
		return nil, fmt.Errorf("union branch %d of %d", i, len(types))
	}
	return types[i], nil
}

// skip reads past a value of type t.
func (d *decoder) skip(t avro.Schema, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("values nested deeper than %d", maxDepth)
	}
	switch t.Type() {
	case avro.Null:
		return nil
	case avro.Boolean:
		_, err := d.take(1)
		return err
	case avro.Int, avro.Long, avro.Enum:
		_, err := d.long()
		return err
	case avro.Float:
		_, err := d.take(4)
		return err
	case avro.Double:
		_, err := d.take(8)
		return err
	case avro.Bytes, avro.String:
		n, err := d.long()
		if err != nil {
			return err
		}
		_, err = d.take(n)
		return err
	case avro.Fixed:
		_, err := d.take(int64(t.(*avro.FixedSchema).Size()))
		return err
	case avro.Union:
		br, err := d.branch(t.(*avro.UnionSchema))
		if err != nil {
			return err
		}
		return d.skip(br, depth+1)
	case avro.Record, avro.Error:
		for _, f := range t.(*avro.RecordSchema).Fields() {
			if err := d.skip(f.Type(), depth+1); err != nil {
				return err
			}
		}
		return nil
	case avro.Ref:
		return d.skip(t.(*avro.RefSchema).Schema(), depth+1)
	case avro.Array:
		return d.skipItems(t.(*avro.ArraySchema).Items(), false, depth)
	case avro.Map:
		return d.skipItems(t.(*avro.MapSchema).Values(), true, depth)
	}
	return fmt.Errorf("cannot skip a value of type %s", t.Type())
}

// skipItems reads past an array's or a map's blocks. Items of a type
// that takes no bytes are not read one by one: a count cannot make it
// loop longer than the bytes present.
func (d *decoder) skipItems(item avro.Schema, isMap bool, depth int) error {
	empty := !isMap && takesNoBytes(item, 0)
	for {
		n, err := d.long()
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if n < 0 {
			if n == math.MinInt64 {
				return errors.New("block count out of range")
			}
			// A negative count is followed by the block's size in
			// bytes: the block is skipped whole.
			size, err := d.long()
			if err != nil {
				return err
			}
			if _, err := d.take(size); err != nil {
				return err
			}
			continue
		}
		if empty {
			continue
		}
		if n > int64(d.left()) { // every item takes a byte at least
			return fmt.Errorf("%d items in %d bytes: %w", n, d.left(), errShort)
		}
		for range n {
			if isMap {
				if err := d.skip(avro.NewPrimitiveSchema(avro.String, nil), depth+1); err != nil {
					return err
				}
			}
			if err := d.skip(item, depth+1); err != nil {
				return err
			}
		}
	}
}

// takesNoBytes reports whether every value of t is encoded in no bytes.
func takesNoBytes(t avro.Schema, depth int) bool {
	if depth > maxDepth {
		return false
	}
	switch t.Type() {
	case avro.Null:
		return true
	case avro.Fixed:
		return t.(*avro.FixedSchema).Size() == 0
	case avro.Record, avro.Error:
		for _, f := range t.(*avro.RecordSchema).Fields() {
			if !takesNoBytes(f.Type(), depth+1) {
				return false
			}
		}
		return true
	case avro.Ref:
		return takesNoBytes(t.(*avro.RefSchema).Schema(), depth+1)
	}
	return false
}
