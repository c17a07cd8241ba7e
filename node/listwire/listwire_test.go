package listwire

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRoundTrip: requests and replies decode to what was encoded, bytes
// that are not UTF-8 and empty values included.
func TestRoundTrip(t *testing.T) {
	req := Request{Prefix: []byte("a/"), Start: []byte{0, 0xff}, End: []byte("b"), Limit: 1000, Values: true, Cursor: "AQ"}
	got, err := DecodeRequest(AppendRequest(nil, req), 100)
	if err != nil || !bytes.Equal(got.Prefix, req.Prefix) || !bytes.Equal(got.Start, req.Start) || !bytes.Equal(got.End, req.End) ||
		got.Limit != 1000 || !got.Values || got.Cursor != "AQ" {
		t.Fatalf("request: %+v, %v", got, err)
	}
	for _, rep := range []Reply{
		{Version: "v1", ContentType: "application/json", Keys: [][]byte{[]byte("a"), {0xff, 0}}, Values: [][]byte{[]byte("x"), {}}, HasValues: true, More: true, Cursor: "c"},
		{Version: "v2", Keys: [][]byte{[]byte("k")}},
		{Version: "v3", Keys: [][]byte{}},
	} {
		b := AppendReply(nil, rep)
		if len(b) != ReplySize(rep) {
			t.Errorf("ReplySize %d, encoded %d", ReplySize(rep), len(b))
		}
		got, err := DecodeReply(b, 10)
		if err != nil || got.Version != rep.Version || got.ContentType != rep.ContentType || got.More != rep.More ||
			got.Cursor != rep.Cursor || got.HasValues != rep.HasValues ||
			!slices.EqualFunc(got.Keys, rep.Keys, bytes.Equal) || !slices.EqualFunc(got.Values, rep.Values, bytes.Equal) {
			t.Fatalf("reply %+v: %+v, %v", rep, got, err)
		}
		if _, err := DecodeReply(b, len(rep.Keys)-1); len(rep.Keys) > 0 && !errors.Is(err, ErrMalformed) {
			t.Errorf("a reply over maxKeys: %v", err)
		}
		for i := range b {
			if _, err := DecodeReply(b[:i], 10); !errors.Is(err, ErrMalformed) {
				t.Fatalf("a reply cut at %d: %v", i, err)
			}
		}
	}
	if _, err := DecodeRequest(AppendRequest(nil, Request{Prefix: make([]byte, 101)}), 100); !errors.Is(err, ErrMalformed) {
		t.Errorf("a prefix over maxLen: %v", err)
	}
}

// FuzzDecode: whatever arrives decodes or is ErrMalformed, never a panic;
// what decodes encodes to bytes that decode to the same (varints may
// have been spelt longer).
func FuzzDecode(f *testing.F) {
	f.Add(AppendRequest(nil, Request{Prefix: []byte("p"), Limit: 3, Values: true}))
	f.Add(AppendReply(nil, Reply{Version: "v", Keys: [][]byte{[]byte("k")}, Values: [][]byte{[]byte("v")}, HasValues: true, More: true, Cursor: "c"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := DecodeRequest(b, 64); err == nil {
			once := AppendRequest(nil, r)
			r2, err := DecodeRequest(once, 64)
			if err != nil {
				t.Fatalf("request %x re-encodes as %x: %v", b, once, err)
			}
			if twice := AppendRequest(nil, r2); !bytes.Equal(once, twice) {
				t.Fatalf("request %x: %x then %x", b, once, twice)
			}
		} else if !errors.Is(err, ErrMalformed) {
			t.Fatal(err)
		}
		if r, err := DecodeReply(b, 1000); err == nil {
			once := AppendReply(nil, r)
			r2, err := DecodeReply(once, 1000)
			if err != nil {
				t.Fatalf("reply %x re-encodes as %x: %v", b, once, err)
			}
			if twice := AppendReply(nil, r2); !bytes.Equal(once, twice) {
				t.Fatalf("reply %x: %x then %x", b, once, twice)
			}
		} else if !errors.Is(err, ErrMalformed) {
			t.Fatal(err)
		}
	})
}
