package partition

import (
	"errors"
	"testing"
)

func TestBuiltin(t *testing.T) {
	for _, tc := range []struct {
		name, identity string
		err            error
	}{
		{"", SequinsName, nil},
		{"sequins", SequinsName, nil},
		{"hadoop", HadoopName, nil},
		{"murmur3", Murmur3Name, nil},
		{"md5", "", ErrUnknown},
		{"wasm:x.wasm", "", ErrUnknown}, // a plugin: plugins.Open, not Builtin
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Builtin(tc.name)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			if p.Identity() != tc.identity {
				t.Fatalf("identity %q, want %q", p.Identity(), tc.identity)
			}
			for _, key := range []string{"", "bar", "1881/boy"} {
				got, alt, err := p.Partition([]byte(key), 20)
				if err != nil || got < 0 || got >= 20 || alt < 0 || alt >= 20 {
					t.Fatalf("Partition(%q) = %d, %d, %v", key, got, alt, err)
				}
			}
		})
	}
	p, _ := Builtin("")
	if got, _, _ := p.Partition([]byte("bar"), 20); got != 19 {
		t.Fatalf("sequins partition of bar = %d, want 19", got)
	}
}
