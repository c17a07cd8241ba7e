//go:build wasip1

// Command csv2json is a spangle decoder plugin: it turns a value stored as
// one header-less CSV record (RFC 4180: fields may be quoted) of the
// columns name, sex, year and count, as in a baby-names dataset,
//
//	Mary,F,1880,7065
//
// into a JSON object with those names, the integers as numbers:
//
//	{"name":"Mary","sex":"F","year":1880,"count":7065}
//
// and names its output application/json. A value that is not one record of
// four fields is rejected with -1, one whose year or count is not an
// integer with -2: the host turns both into an error for that lookup.
//
// Build it as a WASI reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -trimpath -buildmode=c-shared -o csv2json.wasm ./examples/plugins/csv2json
package main

//lint:file-ignore U1000 the host calls the go:wasmexport functions, which staticcheck cannot see

import (
	"bytes"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// main is never called: a reactor's exports are called after _initialize.
func main() {}

// columns are the record's fields in order; integer ones become numbers.
var columns = []struct {
	name    string
	integer bool
}{
	{"name", false},
	{"sex", false},
	{"year", true},
	{"count", true},
}

const contentType = "application/json"

// Errors returned to the host (negative results).
const (
	errRecord  = -1 // not one CSV record of len(columns) fields
	errInteger = -2 // an integer column is not an integer
)

// live holds the buffers lent to the host, which the garbage collector
// cannot see, until spangle_free.
var live = map[*byte][]byte{}

//go:wasmexport spangle_alloc
func alloc(size uint32) *byte {
	b := make([]byte, max(size, 1))
	live[&b[0]] = b
	return &b[0]
}

//go:wasmexport spangle_free
func free(p *byte, size uint32) { delete(live, p) }

// out holds the last decoded value; the host copies it before the next
// call.
var out []byte

//go:wasmexport spangle_decode
func decode(val *byte, valLen uint32) int64 {
	var code int
	out, code = toJSON(out[:0], unsafe.Slice(val, valLen))
	if code < 0 {
		return int64(code)
	}
	return pack(out)
}

//go:wasmexport spangle_content_type
func contentTypeExport() int64 {
	return pack(unsafe.Slice(unsafe.StringData(contentType), len(contentType)))
}

// pack returns (address << 32) | length of b, as the ABI wants.
func pack(b []byte) int64 {
	if len(b) == 0 {
		return 0
	}
	return int64(uintptr(unsafe.Pointer(&b[0])))<<32 | int64(len(b))
}

// toJSON appends the JSON form of the CSV record rec to dst; a negative
// code on error.
func toJSON(dst, rec []byte) ([]byte, int) {
	var ok bool
	fields, unquoted, ok = split(fields[:0], unquoted[:0], rec)
	if !ok || len(fields) != len(columns) {
		return dst, errRecord
	}
	dst = append(dst, '{')
	for i, c := range columns {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = append(dst, c.name...) // plain ASCII
		dst = append(dst, '"', ':')
		if !c.integer {
			dst = appendString(dst, fields[i])
			continue
		}
		v, ok := parseInt(fields[i])
		if !ok {
			return dst, errInteger
		}
		dst = strconv.AppendInt(dst, v, 10)
	}
	return append(dst, '}'), 0
}

// parseInt parses a decimal integer with an optional sign, of at most 18
// digits. (strconv.ParseInt would need a string, an allocation per call.)
func parseInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	return v, true
}

// fields and unquoted are split's buffers, reused from call to call.
var (
	fields   [][]byte
	unquoted []byte
)

// split appends to fields the fields of rec, one RFC 4180 record: fields
// separated by commas, each either plain (no quote, CR or LF) or quoted
// with '"' (a quote inside written twice), with an optional final line
// break. Plain fields point into rec; quoted ones are unquoted into buf. ok
// is false for a malformed record.
//
// encoding/csv does the same, but several times slower here: it allocates
// a 4 KiB buffer per reader, and every loop iteration of a guest costs a
// check with the host (see plugins/ABI.md, "Cost").
func split(fields [][]byte, buf, rec []byte) (_ [][]byte, _ []byte, ok bool) {
	rec = bytes.TrimSuffix(rec, []byte("\n"))
	rec = bytes.TrimSuffix(rec, []byte("\r"))
	for {
		if len(rec) > 0 && rec[0] == '"' {
			start := len(buf)
			rec = rec[1:]
			for {
				i := bytes.IndexByte(rec, '"')
				if i < 0 {
					return fields, buf, false // unterminated
				}
				buf = append(buf, rec[:i]...)
				rec = rec[i+1:]
				if len(rec) == 0 || rec[0] != '"' {
					break
				}
				buf = append(buf, '"') // a doubled quote
				rec = rec[1:]
			}
			fields = append(fields, buf[start:len(buf):len(buf)])
			if len(rec) == 0 {
				return fields, buf, true
			}
			if rec[0] != ',' {
				return fields, buf, false // text after the closing quote
			}
			rec = rec[1:]
			continue
		}
		field, rest, more := bytes.Cut(rec, []byte(","))
		if bytes.ContainsAny(field, "\"\r\n") {
			return fields, buf, false
		}
		fields = append(fields, field)
		if !more {
			return fields, buf, true
		}
		rec = rest
	}
}

// appendString appends s to dst as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 replaced by U+FFFD.
func appendString(dst, s []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for len(s) > 0 {
		c := s[0]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		case c < utf8.RuneSelf:
			dst = append(dst, c)
		default:
			r, size := utf8.DecodeRune(s)
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, `\ufffd`...)
			} else {
				dst = append(dst, s[:size]...)
			}
			s = s[size:]
			continue
		}
		s = s[1:]
	}
	return append(dst, '"')
}
