package edge

import (
	"strconv"
	"time"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// accessRecord is what one request's line says. The doors fill it as
// they answer (the handlers through accessNote); every string may come
// from the client and is escaped when written.
type accessRecord struct {
	start   time.Time
	elapsed time.Duration
	client  string // the client's address: the peer's, or X-Forwarded-For's through a trusted proxy
	remote  string // the connection's peer, host:port ("" for NATS)
	method  string // HTTP method; "" for NATS
	target  string // the request target as received (path and query), or the NATS subject
	proto   string // "HTTP/1.1", "HTTP/2.0", "NATS"
	tls     bool
	status  int
	bytes   int64 // body bytes sent
	// Set by the handlers.
	db        string
	version   string // the version answered
	hot       bool   // answered from the hot cache
	proxiedTo string // the peer that answered, when proxied
	keys      int    // keys asked (a lookup: 1, a batch: its keys) or listed
	userAgent string
	referer   string
}

// lineScratch is the stack buffer a line is formatted in; a longer line
// (a long path or user agent) moves to the heap.
const lineScratch = 512

// appendCombined appends rec as a Combined Log Format line — what
// GoAccess, AWStats and every log tool read — followed by spangle's own
// fields as key=value:
//
//	client - - [02/Jan/2006:15:04:05 -0700] "GET /db/key HTTP/1.1" 200 5 "referer" "user agent" rt=0.000123 db="db" version="v" hot=1 proxied_to="-" keys=1 tls=0 remote="127.0.0.1:5555"
//
// Strings are escaped as nginx does: '"', '\\', control bytes and bytes
// from 0x7f as \xHH, so that no request can end a field or the line.
func appendCombined(b []byte, rec *accessRecord, st *logStamp) []byte {
	b = appendEscaped(b, rec.client)
	b = append(b, " - - ["...)
	b = append(b, st.combined...)
	b = append(b, `] "`...)
	if rec.method != "" {
		b = appendEscaped(b, rec.method)
		b = append(b, ' ')
	}
	b = appendEscaped(b, rec.target)
	b = append(b, ' ')
	b = appendEscaped(b, rec.proto)
	b = append(b, `" `...)
	b = strconv.AppendInt(b, int64(rec.status), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, rec.bytes, 10)
	b = append(b, ` "`...)
	b = appendEscaped(b, rec.referer)
	b = append(b, `" "`...)
	b = appendEscaped(b, rec.userAgent)
	b = append(b, `" rt=`...)
	b = appendSeconds(b, rec.elapsed)
	b = append(b, ` db="`...)
	b = appendEscaped(b, rec.db)
	b = append(b, `" version="`...)
	b = appendEscaped(b, rec.version)
	b = append(b, `" hot=`...)
	b = appendBit(b, rec.hot)
	b = append(b, ` proxied_to="`...)
	b = appendEscaped(b, rec.proxiedTo)
	b = append(b, `" keys=`...)
	b = strconv.AppendInt(b, int64(rec.keys), 10)
	b = append(b, ` tls=`...)
	b = appendBit(b, rec.tls)
	b = append(b, ` remote="`...)
	b = appendEscaped(b, rec.remote)
	return append(b, "\"\n"...)
}

// appendJSON appends rec as one JSON object and a newline, every field
// present:
//
//	{"time":"2006-01-02T15:04:05.000Z","client":"…","remote":"…","method":"GET","path":"/db/key","proto":"HTTP/1.1","tls":false,
//	 "status":200,"bytes":5,"duration_us":123,"db":"db","version":"v","hot":true,"proxied_to":"","keys":1,"user_agent":"…","referer":"…"}
//
// For NATS, path is the subject and method is "".
func appendJSON(b []byte, rec *accessRecord, st *logStamp) []byte {
	b = append(b, `{"time":"`...)
	b = append(b, st.json...)
	us := rec.start.Nanosecond() / 1000
	b = append(b, '.', byte('0'+us/100000), byte('0'+us/10000%10), byte('0'+us/1000%10),
		byte('0'+us/100%10), byte('0'+us/10%10), byte('0'+us%10), 'Z')
	b = append(b, `","client":`...)
	b = appendJSONText(b, rec.client)
	b = append(b, `,"remote":`...)
	b = appendJSONText(b, rec.remote)
	b = append(b, `,"method":`...)
	b = appendJSONText(b, rec.method)
	b = append(b, `,"path":`...)
	b = appendJSONText(b, rec.target)
	b = append(b, `,"proto":`...)
	b = appendJSONText(b, rec.proto)
	b = append(b, `,"tls":`...)
	b = strconv.AppendBool(b, rec.tls)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(rec.status), 10)
	b = append(b, `,"bytes":`...)
	b = strconv.AppendInt(b, rec.bytes, 10)
	b = append(b, `,"duration_us":`...)
	b = strconv.AppendInt(b, rec.elapsed.Microseconds(), 10)
	b = append(b, `,"db":`...)
	b = appendJSONText(b, rec.db)
	b = append(b, `,"version":`...)
	b = appendJSONText(b, rec.version)
	b = append(b, `,"hot":`...)
	b = strconv.AppendBool(b, rec.hot)
	b = append(b, `,"proxied_to":`...)
	b = appendJSONText(b, rec.proxiedTo)
	b = append(b, `,"keys":`...)
	b = strconv.AppendInt(b, int64(rec.keys), 10)
	b = append(b, `,"user_agent":`...)
	b = appendJSONText(b, rec.userAgent)
	b = append(b, `,"referer":`...)
	b = appendJSONText(b, rec.referer)
	return append(b, "}\n"...)
}

// appendSeconds appends d in seconds with microseconds: "0.000123".
func appendSeconds(b []byte, d time.Duration) []byte {
	us := max(d.Microseconds(), 0)
	b = strconv.AppendInt(b, us/1e6, 10)
	frac := us % 1e6
	b = append(b, '.',
		byte('0'+frac/100000), byte('0'+frac/10000%10), byte('0'+frac/1000%10),
		byte('0'+frac/100%10), byte('0'+frac/10%10), byte('0'+frac%10))
	return b
}

func appendBit(b []byte, v bool) []byte {
	if v {
		return append(b, '1')
	}
	return append(b, '0')
}

// appendEscaped appends s for a Combined Log Format field: "-" when
// empty; '"', '\\', bytes below 0x20 and from 0x7f as \xHH (nginx's
// escaping), everything else as is.
func appendEscaped(b []byte, s string) []byte {
	if s == "" {
		return append(b, '-')
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			b = append(b, '\\', 'x', hexDigits[c>>4], hexDigits[c&0xf])
			continue
		}
		b = append(b, c)
	}
	return b
}

// appendJSONText appends s as a JSON string: '"', '\\' and control
// bytes (and DEL) escaped, bytes that are not UTF-8 replaced by U+FFFD
// as encoding/json does.
func appendJSONText(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20 || c == 0x7f:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// write formats rec in l's format and queues the line.
func (l *AccessLog) write(rec *accessRecord) {
	var scratch [lineScratch]byte
	var line []byte
	st := l.stampOf(rec.start)
	if l.json {
		line = appendJSON(scratch[:0], rec, st)
	} else {
		line = appendCombined(scratch[:0], rec, st)
	}
	l.add(line)
}

// logStamp is one second's time, formatted for both formats once.
type logStamp struct {
	sec      int64
	combined []byte // 02/Jan/2006:15:04:05 -0700, local time
	json     []byte // 2006-01-02T15:04:05 (the fraction and Z follow), UTC
}

// stampOf returns the stamp of t's second, from the last one made when
// it is of the same second.
func (l *AccessLog) stampOf(t time.Time) *logStamp {
	sec := t.Unix()
	if st := l.stamp.Load(); st != nil && st.sec == sec {
		return st
	}
	st := &logStamp{
		sec:      sec,
		combined: t.AppendFormat(nil, "02/Jan/2006:15:04:05 -0700"),
		json:     t.UTC().AppendFormat(nil, "2006-01-02T15:04:05"),
	}
	l.stamp.Store(st)
	return st
}
