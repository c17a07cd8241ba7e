package plugins

import (
	"context"
	"errors"
	"io/fs"
	"testing"
)

func TestOpenSpec(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		spec, identity string
		err            error // of Open
		checkErr       error // of CheckSpec, which does not open modules
	}{
		{spec: "", identity: Sequins},
		{spec: "hadoop", identity: Hadoop},
		{spec: "murmur3", identity: Murmur3},
		{spec: "md5", err: ErrUnknownPartitioner, checkErr: ErrUnknownPartitioner},
		{spec: "wasm:", err: ErrUnknownPartitioner, checkErr: ErrUnknownPartitioner},
		{spec: "wasm:https://example.com/p.wasm", err: ErrUnknownPartitioner, checkErr: ErrUnknownPartitioner},
		{spec: "wasm:testdata/murmur3.wasm", identity: fileIdentity(t, "testdata/murmur3.wasm")},
		{spec: "wasm:testdata/no_such.wasm", err: fs.ErrNotExist},
		{spec: "wasm:testdata/no_alloc.wasm", err: ErrMissingExport},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			if err := CheckSpec(tc.spec); !errors.Is(err, tc.checkErr) {
				t.Errorf("CheckSpec: %v, want %v", err, tc.checkErr)
			}
			p, err := Open(ctx, tc.spec, testConfig(t))
			if !errors.Is(err, tc.err) {
				t.Fatalf("Open: %v, want %v", err, tc.err)
			}
			if err != nil {
				if p != nil {
					t.Fatalf("Open returned %v with an error", p)
				}
				return
			}
			if p.Identity() != tc.identity {
				t.Fatalf("identity %q, want %q", p.Identity(), tc.identity)
			}
			if wp, ok := p.(*WasmPartitioner); ok {
				if err := wp.Close(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
