package plugins

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestHostileModuleFails checks that modules which cannot or must not run
// fail to open with a clear error.
func TestHostileModuleFails(t *testing.T) {
	for _, tc := range []struct {
		module string
		want   error
		msg    string // in the error
	}{
		{"env_import", ErrForbiddenImport, "function env.foo"},
		{"wasi_unknown", ErrForbiddenImport, "sock_open, which is not a WASI preview 1 function"},
		{"import_memory", ErrForbiddenImport, "memory env.memory"},
		{"no_alloc", ErrMissingExport, "does not export spangle_alloc"},
		{"no_memory", ErrMissingExport, `"memory"`},
		{"bad_signature", ErrMissingExport, "spangle_partition as (i32, i32) -> (i64), want (i32, i32, i32) -> (i32)"},
		{"echo", ErrMissingExport, "does not export spangle_partition"}, // a decoder
		{"command", ErrBadModule, "-buildmode=c-shared"},
		{"big_memory", ErrPluginMemory, "1000 pages"},
		{"init_loop", ErrPluginTimeout, "_initialize"},
		{"start_loop", ErrPluginTimeout, "InitTimeout"}, // a start section that loops
		{"bad_alloc", nil, ""}, // opens: spangle_alloc is called on first use
	} {
		t.Run(tc.module, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.InitTimeout = 50 * time.Millisecond
			start := time.Now()
			p, err := OpenPartitioner(context.Background(), "testdata/"+tc.module+".wasm", cfg)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if err == nil {
				p.Close(context.Background())
				return
			}
			if !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), tc.module+".wasm") {
				t.Errorf("error %q lacks %q or the module path", err, tc.msg)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("took %v", took)
			}
		})
	}
	t.Run("not wasm", func(t *testing.T) {
		path := t.TempDir() + "/x.wasm"
		if err := os.WriteFile(path, []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenPartitioner(context.Background(), path, testConfig(t)); !errors.Is(err, ErrBadModule) {
			t.Fatalf("err = %v, want ErrBadModule", err)
		}
	})
	t.Run("bad config", func(t *testing.T) {
		cfg := testConfig(t)
		cfg.MemoryLimitPages = 1 << 20
		if _, err := OpenPartitioner(context.Background(), "testdata/murmur3.wasm", cfg); !errors.Is(err, ErrConfig) {
			t.Fatalf("err = %v, want ErrConfig", err)
		}
	})
}

func TestBadAllocPointer(t *testing.T) {
	p := openPartitioner(t, "bad_alloc", testConfig(t))
	_, _, err := p.Partition([]byte("k"), 10)
	if !errors.Is(err, ErrBadResult) || !strings.Contains(err.Error(), "spangle_alloc") {
		t.Fatalf("err = %v, want ErrBadResult from spangle_alloc", err)
	}
}

// TestHostilePartitioner runs each misbehaviour of hostile.wat: each is an
// error of that call, and the next call works on a fresh instance.
func TestHostilePartitioner(t *testing.T) {
	const n = 1 << 20
	for _, tc := range []struct {
		name, key string
		want      error
		discarded bool // the instance is replaced
		result    func(p int) bool
	}{
		{name: "loop", key: "loop", want: ErrPluginTimeout, discarded: true},
		{name: "grow", key: "grow", want: ErrPluginMemory, discarded: true},
		{name: "trap", key: "trap", want: ErrPluginTrap, discarded: true},
		{name: "exit", key: "x", want: ErrPluginExit, discarded: true},
		{name: "negative", key: "n", want: ErrPluginError},
		{name: "out of range", key: "o", want: ErrBadResult, discarded: true},
		// WASI gives nothing: no preopened directory, no file, no
		// environment; one argument; a fake clock.
		{name: "no preopens", key: "p", result: func(errno int) bool { return errno == 8 }}, // EBADF
		{name: "path_open", key: "f", result: func(errno int) bool { return errno == 8 }},
		{name: "environ", key: "e", result: func(count int) bool { return count == 0 }},
		{name: "args", key: "a", result: func(count int) bool { return count == 1 }},
		// wazero's fake clock: 2022-01-01T00:00:00Z, not now.
		{name: "clock", key: "c", result: func(secs int) bool { return secs == 1640995200&0xffff }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.PoolSize = 1
			cfg.CallTimeout = 5 * time.Second // growing page by page is slow under -race
			if tc.want == ErrPluginTimeout {
				cfg.CallTimeout = 250 * time.Millisecond // the next call, on a fresh instance, must fit in it too under -race
			}
			cfg.MemoryLimitPages = 64
			p := openPartitioner(t, "hostile", cfg)
			start := time.Now()
			got, _, err := p.Partition([]byte(tc.key), n)
			took := time.Since(start)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Partition(%q) = %d, %v; want %v", tc.key, got, err, tc.want)
			}
			if err != nil && !strings.Contains(err.Error(), "hostile.wasm") {
				t.Errorf("error %q does not name the module", err)
			}
			if tc.result != nil && !tc.result(got) {
				t.Errorf("Partition(%q) = %d", tc.key, got)
			}
			if took > cfg.CallTimeout+5*time.Second {
				t.Errorf("took %v", took)
			}
			discarded := testutil.ToFloat64(p.h.metrics.replaced)
			if want := map[bool]float64{false: 0, true: 1}[tc.discarded]; discarded != want {
				t.Errorf("%v instances discarded, want %v", discarded, want)
			}
			// The next call works, on a fresh instance if need be.
			if got, _, err := p.Partition([]byte("zz"), n); err != nil || got != 0 {
				t.Fatalf("next call: %d, %v", got, err)
			}
		})
	}
}

func TestTimeoutIsBounded(t *testing.T) {
	cfg := testConfig(t)
	cfg.CallTimeout = 20 * time.Millisecond
	p := openPartitioner(t, "hostile", cfg)
	for range 3 {
		start := time.Now()
		_, _, err := p.Partition([]byte("loop"), 10)
		if !errors.Is(err, ErrPluginTimeout) {
			t.Fatalf("err = %v", err)
		}
		if took := time.Since(start); took < cfg.CallTimeout || took > 2*time.Second {
			t.Fatalf("stopped after %v, want about %v", took, cfg.CallTimeout)
		}
	}
	if n := testutil.ToFloat64(p.h.metrics.errors[kindTimeout]); n != 3 {
		t.Fatalf("%v timeouts counted, want 3", n)
	}
}

func TestHostileBatch(t *testing.T) {
	for _, tc := range []struct {
		first string
		want  error
	}{
		{"loop", ErrPluginTimeout},
		{"trap", ErrPluginTrap},
		{"n", ErrPluginError},
		{"o", ErrBadResult},
	} {
		t.Run(tc.first, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.PoolSize = 1
			cfg.CallTimeout = 250 * time.Millisecond // the next call, on a fresh instance, must fit in it too under -race
			p := openPartitioner(t, "hostile", cfg)
			keys := [][]byte{[]byte(tc.first), []byte("b"), []byte("c")}
			if err := p.PartitionBatch(keys, 10, make([]int, 3)); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			out := []int{7, 7}
			if err := p.PartitionBatch([][]byte{[]byte("zz"), []byte("b")}, 10, out); err != nil || out[0] != 0 || out[1] != 0 {
				t.Fatalf("next batch: %v, %v", out, err)
			}
		})
	}
}

func TestHostileDecoder(t *testing.T) {
	for _, tc := range []struct {
		val  string
		want error
	}{
		{"loop", ErrPluginTimeout},
		{"grow", ErrPluginMemory},
		{"trap", ErrPluginTrap},
		{"x", ErrPluginExit},
		{"n", ErrPluginError},
		{"o", ErrBadResult}, // a pointer beyond memory
	} {
		t.Run(tc.val, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.PoolSize = 1
			cfg.CallTimeout = 5 * time.Second
			if tc.want == ErrPluginTimeout {
				cfg.CallTimeout = 250 * time.Millisecond // the next call, on a fresh instance, must fit in it too under -race
			}
			cfg.MemoryLimitPages = 64
			d := openDecoder(t, "hostile", cfg)
			if d.ContentType() != "application/x-hostile" {
				t.Fatalf("content type %q", d.ContentType())
			}
			if out, err := d.Decode(context.Background(), []byte(tc.val)); !errors.Is(err, tc.want) {
				t.Fatalf("Decode(%q) = %q, %v; want %v", tc.val, out, err, tc.want)
			}
			if out, err := d.Decode(context.Background(), []byte("zz")); err != nil || string(out) != "zz" {
				t.Fatalf("next call: %q, %v", out, err)
			}
		})
	}
}

// TestGuestOutputInError checks that what a guest writes before it dies
// (a Go guest's panic message) is in the error.
func TestGuestOutputInError(t *testing.T) {
	p := openPartitioner(t, "hostile", testConfig(t))
	_, _, err := p.Partition([]byte("x"), 10)
	if !errors.Is(err, ErrPluginExit) || !strings.Contains(err.Error(), "hostile: exiting with 3") ||
		!strings.Contains(err.Error(), "exit_code(3)") {
		t.Fatalf("err = %v", err)
	}
}

// TestDecodeCanceled stops a looping decode with the caller's context.
func TestDecodeCanceled(t *testing.T) {
	cfg := testConfig(t)
	cfg.CallTimeout = time.Hour
	d := openDecoder(t, "hostile", cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err := d.Decode(ctx, []byte("loop"))
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrPluginTimeout) {
		t.Fatalf("err = %v, want the caller's deadline", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := d.Decode(ctx, []byte("zz")); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled ctx: %v", err)
	}
	if out, err := d.Decode(context.Background(), []byte("zz")); err != nil || string(out) != "zz" {
		t.Fatalf("next call: %q, %v", out, err)
	}
}
