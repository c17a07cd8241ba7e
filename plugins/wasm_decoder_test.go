package plugins

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

func TestEchoDecoder(t *testing.T) {
	d := openDecoder(t, "echo", testConfig(t))
	if want := fileIdentity(t, "testdata/echo.wasm"); d.Identity() != want {
		t.Fatalf("identity %s, want %s", d.Identity(), want)
	}
	if ct := d.ContentType(); ct != "text/plain; charset=utf-8" {
		t.Fatalf("content type %q", ct)
	}
	ctx := context.Background()
	for _, size := range []int{0, 1, 255, 256, 4096, 1 << 20, 3 << 20} {
		val := bytes.Repeat([]byte{'v'}, size)
		out, err := d.Decode(ctx, val)
		if err != nil {
			t.Fatalf("%d bytes: %v", size, err)
		}
		if !bytes.Equal(out, val) || out == nil {
			t.Fatalf("%d bytes: got %d bytes", size, len(out))
		}
	}
	// The result belongs to the caller: the next call does not touch it.
	a, _ := d.Decode(ctx, []byte("first"))
	if _, err := d.Decode(ctx, []byte("second")); err != nil {
		t.Fatal(err)
	}
	if string(a) != "first" {
		t.Fatalf("result changed to %q", a)
	}
}

func TestDecoderNeedsDecodeExport(t *testing.T) {
	_, err := OpenDecoder(context.Background(), "testdata/murmur3.wasm", testConfig(t))
	if !errors.Is(err, ErrMissingExport) {
		t.Fatalf("err = %v, want ErrMissingExport", err)
	}
}

func TestConcurrentDecode(t *testing.T) {
	d := openDecoder(t, "echo", testConfig(t))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				val := fmt.Appendf(nil, "goroutine %d value %d %s", g, i, bytes.Repeat([]byte{'x'}, i*7))
				out, err := d.Decode(context.Background(), val)
				if err != nil || !bytes.Equal(out, val) {
					errs <- fmt.Errorf("goroutine %d value %d: %q, %v", g, i, out, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestDecoderClose(t *testing.T) {
	ctx := context.Background()
	d, err := OpenDecoder(ctx, "testdata/echo.wasm", testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Decode(ctx, []byte("v")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Decode after Close: %v", err)
	}
}
