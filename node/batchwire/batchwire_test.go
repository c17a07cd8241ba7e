package batchwire

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestRequestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		keys [][]byte
	}{
		{"none", nil},
		{"one", [][]byte{[]byte("a")}},
		{"empty key", [][]byte{{}}},
		{"binary", [][]byte{{0, '\n', 0xff, 0xfe}, []byte("x"), {}}},
		{"long", [][]byte{bytes.Repeat([]byte{0x80}, 1<<10), bytes.Repeat([]byte("k"), 200)}},
		{"duplicates", [][]byte{[]byte("a"), []byte("a")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := AppendRequest(nil, tc.keys)
			if len(b) != RequestSize(tc.keys) {
				t.Fatalf("RequestSize %d, encoded %d", RequestSize(tc.keys), len(b))
			}
			got, err := DecodeRequest(b, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.keys) {
				t.Fatalf("%d keys, want %d", len(got), len(tc.keys))
			}
			for i := range got {
				if !bytes.Equal(got[i], tc.keys[i]) {
					t.Errorf("key %d = %q, want %q", i, got[i], tc.keys[i])
				}
			}
		})
	}
}

func TestReplyRoundTrip(t *testing.T) {
	r := Reply{Version: "20260301", ContentType: "text/plain", Items: []Item{
		{Status: Found, Value: []byte("v")},
		{Status: Missing},
		{Status: Found, Value: []byte{}},
		{Status: Failed, Value: []byte("no replica answered")},
		{Status: Found, Value: bytes.Repeat([]byte{0}, 300)},
	}}
	b := AppendReply(nil, r)
	size := ReplyHeaderSize(r.Version, r.ContentType, len(r.Items))
	for _, it := range r.Items {
		size += ItemSize(it.Status, len(it.Value))
	}
	if size != len(b) {
		t.Fatalf("sizes add up to %d, encoded %d", size, len(b))
	}
	got, err := DecodeReply(b, len(r.Items))
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != r.Version || got.ContentType != r.ContentType || len(got.Items) != len(r.Items) {
		t.Fatalf("got %+v", got)
	}
	for i, it := range got.Items {
		if it.Status != r.Items[i].Status || !bytes.Equal(it.Value, r.Items[i].Value) {
			t.Errorf("item %d = %v %q, want %v %q", i, it.Status, it.Value, r.Items[i].Status, r.Items[i].Value)
		}
	}
	if got.Items[2].Value == nil || got.Items[1].Value != nil {
		t.Error("an empty value must decode non-nil, a missing key nil")
	}
}

func TestDecodeErrors(t *testing.T) {
	req := func(s string) []byte { return append([]byte{'S', 'B', 'Q', 1}, s...) }
	for _, tc := range []struct {
		name    string
		b       []byte
		maxKeys int
		want    error
		text    string
	}{
		{"empty", nil, 0, ErrMalformed, "not a batch request"},
		{"reply as request", AppendReply(nil, Reply{}), 0, ErrMalformed, "not a batch request"},
		{"future format", []byte{'S', 'B', 'Q', 2, 0}, 0, ErrMalformed, "format 2"},
		{"no count", req(""), 0, ErrMalformed, "key count"},
		{"count beyond bytes", req("\x05\x00"), 0, ErrMalformed, "5 keys in 1 bytes"},
		{"huge count", req("\xff\xff\xff\xff\xff\xff\xff\xff\x7f"), 0, ErrMalformed, "keys in 0 bytes"},
		{"key beyond end", req("\x01\x05ab"), 0, ErrMalformed, "key of 5 bytes"},
		{"trailing", req("\x01\x01ab"), 0, ErrMalformed, "after the last key"},
		{"overlong varint", req("\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01"), 0, ErrMalformed, "key count"},
		{"too many", AppendRequest(nil, [][]byte{{1}, {2}, {3}}), 2, ErrTooManyKeys, "3 keys, at most 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeRequest(tc.b, tc.maxKeys)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("err = %v, want %v containing %q", err, tc.want, tc.text)
			}
		})
	}
	for _, tc := range []struct {
		name string
		b    []byte
		text string
	}{
		{"request as reply", AppendRequest(nil, nil), "not a batch reply"},
		{"bad status", append(AppendReplyHeader(nil, "v", "", 1), 7), "status 0x7"},
		{"short", AppendReplyHeader(nil, "v", "", 2), "2 items in 0 bytes"},
		{"value beyond end", append(AppendReplyHeader(nil, "v", "", 1), 1, 9), "value of 9 bytes"},
		{"trailing", append(AppendReply(nil, Reply{Items: []Item{{}}}), 0), "after the last item"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeReply(tc.b, 0)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("err = %v, want ErrMalformed containing %q", err, tc.text)
			}
		})
	}
}

// Example_workedExample is the example of edge/BATCH.md, byte for byte.
func Example_workedExample() {
	req := AppendRequest(nil, [][]byte{[]byte("a"), {}, {0x00, 0xff}})
	fmt.Printf("% x\n", req)
	rep := AppendReply(nil, Reply{Version: "v2", Items: []Item{
		{Status: Found, Value: []byte("hi")},
		{Status: Missing},
		{Status: Found, Value: []byte{}},
	}})
	fmt.Printf("% x\n", rep)
	// Output:
	// 53 42 51 01 03 01 61 00 02 00 ff
	// 53 42 52 01 02 76 32 00 03 01 02 68 69 00 01 00
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add(AppendRequest(nil, nil))
	f.Add(AppendRequest(nil, [][]byte{[]byte("a"), {}, {0, 0xff}}))
	f.Add(AppendRequest(nil, [][]byte{bytes.Repeat([]byte("x"), 300)}))
	f.Add([]byte("SBQ\x01\xff\xff\xff\xff\x0f"))
	f.Add([]byte("SBR\x01\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		keys, err := DecodeRequest(b, 1000)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooManyKeys) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if len(keys) > 1000 {
			t.Fatalf("%d keys past the limit", len(keys))
		}
		// A decoded request re-encodes to the same bytes, except that a
		// non-minimal varint may have been accepted.
		again, err := DecodeRequest(AppendRequest(nil, keys), 0)
		if err != nil || len(again) != len(keys) {
			t.Fatalf("re-decode: %v", err)
		}
		for i := range keys {
			if !bytes.Equal(again[i], keys[i]) {
				t.Fatalf("key %d changed", i)
			}
		}
	})
}

func FuzzDecodeReply(f *testing.F) {
	f.Add(AppendReply(nil, Reply{}))
	f.Add(AppendReply(nil, Reply{Version: "v2", ContentType: "text/plain", Items: []Item{
		{Status: Found, Value: []byte("hi")}, {Status: Missing}, {Status: Failed, Value: []byte("x")},
	}}))
	f.Add([]byte("SBR\x01\x02v2\x00\x03\x01\x02hi\x00\x01\x00"))
	f.Add([]byte("SBR\x01\x00\x00\xff\xff\x03"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeReply(b, 0)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		again, err := DecodeReply(AppendReply(nil, r), 0)
		if err != nil || again.Version != r.Version || again.ContentType != r.ContentType || len(again.Items) != len(r.Items) {
			t.Fatalf("re-decode: %v", err)
		}
		for i, it := range r.Items {
			if again.Items[i].Status != it.Status || !bytes.Equal(again.Items[i].Value, it.Value) {
				t.Fatalf("item %d changed", i)
			}
		}
	})
}
