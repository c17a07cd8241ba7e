package node

import "testing"

func TestAppendETag(t *testing.T) {
	got := string(AppendETag(nil, []byte("hello")))
	if len(got) != ETagLen || got[0] != '"' || got[ETagLen-1] != '"' {
		t.Fatalf("AppendETag = %q", got)
	}
	// xxhash64("hello") = 0x26c7827d889f6da3 (the xxhash reference value).
	if want := `"26c7827d889f6da3"`; got != want {
		t.Errorf("AppendETag(hello) = %s, want %s", got, want)
	}
	if a, b := string(AppendETag(nil, nil)), string(AppendETag(nil, []byte{})); a != b {
		t.Errorf("nil and empty differ: %s %s", a, b)
	}
}
