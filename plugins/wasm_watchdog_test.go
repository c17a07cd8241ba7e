package plugins

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCallsStartNoGoroutine checks that the host has turned off wazero's
// goroutine per call (skipCallGoroutine), which also allocates: a call
// allocates nothing. It fails when a wazero upgrade changes the internals
// skipCallGoroutine relies on.
func TestCallsStartNoGoroutine(t *testing.T) {
	p := openPartitioner(t, "murmur3", testConfig(t))
	if !p.h.noCallGoroutine {
		t.Fatal("wazero starts a goroutine per call: skipCallGoroutine no longer matches wazero's internals")
	}
	if n := testing.AllocsPerRun(1000, func() {
		if _, _, err := p.Partition(benchKey, 16); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per call, want 0", n)
	}
	// A module with a start section keeps the goroutine, and is stopped
	// all the same.
	cfg := testConfig(t)
	cfg.PoolSize = 1
	cfg.CallTimeout = 20 * time.Millisecond
	s := openPartitioner(t, "start", cfg)
	if s.h.noCallGoroutine {
		t.Fatal("a module with a start section starts no goroutine per call")
	}
	if _, _, err := s.Partition([]byte("k"), 7); !errors.Is(err, ErrPluginTimeout) {
		t.Fatalf("looping call: %v, want ErrPluginTimeout", err)
	}
	if got, _, err := s.Partition([]byte("k"), 5); err != nil || got != 0 {
		t.Fatalf("next call: %d, %v; want 0 (the start section ran)", got, err)
	}
}

// TestWatchdogStopsLoop has one caller loop in the guest while others keep
// calling other instances of the module: the loop is stopped within
// CallTimeout plus two watchdog intervals (and a margin for a loaded
// machine), and the other calls all succeed meanwhile.
func TestWatchdogStopsLoop(t *testing.T) {
	cfg := testConfig(t)
	cfg.PoolSize = 3
	cfg.CallTimeout = 300 * time.Millisecond // a good call must never reach it, even on a loaded machine
	cfg.WatchdogInterval = 5 * time.Millisecond
	const margin = time.Second // -race, a loaded 2-core machine: without the watchdog the loop never ends
	p := openPartitioner(t, "hostile", cfg)

	stop := make(chan struct{})
	var calls atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if got, _, err := p.Partition([]byte("zz"), 10); err != nil || got != 0 {
					errs <- errors.Join(err, errors.New("good call failed or returned nonzero"))
					return
				}
				calls.Add(1)
			}
		})
	}
	waitFor(t, 10*time.Second, func() bool { return calls.Load() > 0 })
	for range 3 {
		before := calls.Load()
		start := time.Now()
		_, _, err := p.Partition([]byte("loop"), 10)
		took := time.Since(start)
		if !errors.Is(err, ErrPluginTimeout) {
			t.Fatalf("looping call: %v, want ErrPluginTimeout", err)
		}
		if took < cfg.CallTimeout || took > cfg.CallTimeout+2*cfg.WatchdogInterval+margin {
			t.Errorf("loop stopped after %v, want [%v, %v]", took, cfg.CallTimeout, cfg.CallTimeout+2*cfg.WatchdogInterval+margin)
		}
		if calls.Load() == before {
			t.Error("no other call completed while the guest looped")
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(p.h.slots); n != cfg.PoolSize {
		t.Fatalf("%d slots after the calls, want %d", n, cfg.PoolSize)
	}
}

// TestLoopingGuestLetsGCRun checks what WithCloseOnContextDone is kept
// for, now that wazero starts no goroutine per call: a guest looping in
// machine code still lets the garbage collector stop the world (its loop
// headers exit to Go), so the host does not freeze until the deadline.
func TestLoopingGuestLetsGCRun(t *testing.T) {
	cfg := testConfig(t)
	cfg.CallTimeout = 3 * time.Second // a GC under -race on a loaded machine takes well under half of it
	p := openPartitioner(t, "hostile", cfg)
	if !p.h.noCallGoroutine {
		t.Skip("wazero starts a goroutine per call")
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := p.Partition([]byte("loop"), 10)
		done <- err
	}()
	waitFor(t, 10*time.Second, func() bool { return len(p.h.slots) < cfg.PoolSize })
	start := time.Now()
	runtime.GC()
	if took := time.Since(start); took > cfg.CallTimeout/2 {
		t.Errorf("GC took %v while the guest looped", took)
	}
	select {
	case err := <-done:
		t.Fatalf("the loop ended before its deadline: %v", err)
	default:
	}
	if err := <-done; !errors.Is(err, ErrPluginTimeout) {
		t.Fatalf("err = %v, want ErrPluginTimeout", err)
	}
}

// TestWatchdogWakes checks that the watchdog sleeps while no call runs,
// and that a call wakes it.
func TestWatchdogWakes(t *testing.T) {
	cfg := testConfig(t)
	cfg.CallTimeout = 20 * time.Millisecond
	p := openPartitioner(t, "hostile", cfg)
	for range 2 {
		waitFor(t, 10*time.Second, p.h.watch.parked.Load)
		start := time.Now()
		if _, _, err := p.Partition([]byte("loop"), 10); !errors.Is(err, ErrPluginTimeout) {
			t.Fatalf("looping call: %v, want ErrPluginTimeout", err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("stopped after %v", took)
		}
	}
}

// TestDecodeCanceledWhileRunning cancels the caller's ctx of a looping
// decode: the watchdog stops it within an interval or so.
func TestDecodeCanceledWhileRunning(t *testing.T) {
	cfg := testConfig(t)
	cfg.CallTimeout = time.Hour
	cfg.WatchdogInterval = 5 * time.Millisecond
	d := openDecoder(t, "hostile", cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := d.Decode(ctx, []byte("loop"))
		done <- err
	}()
	waitFor(t, 10*time.Second, func() bool { return len(d.h.slots) < cfg.PoolSize })
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || errors.Is(err, ErrPluginTimeout) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("stopped %v after the cancel", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("canceling the ctx did not stop the call")
	}
	if out, err := d.Decode(context.Background(), []byte("zz")); err != nil || string(out) != "zz" {
		t.Fatalf("next call: %q, %v", out, err)
	}
}

// TestWatchdogStopsOnClose checks that each plugin has one watchdog
// goroutine, that Close stops it, and that a module failing to open leaks
// none.
func TestWatchdogStopsOnClose(t *testing.T) {
	ctx := context.Background()
	base := watchdogGoroutines()
	p, err := OpenPartitioner(ctx, "testdata/murmur3.wasm", testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	d, err := OpenDecoder(ctx, "testdata/echo.wasm", testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.InitTimeout = 20 * time.Millisecond
	if _, err := OpenPartitioner(ctx, "testdata/init_loop.wasm", cfg); !errors.Is(err, ErrPluginTimeout) {
		t.Fatalf("init_loop: %v, want ErrPluginTimeout", err)
	}
	if n := watchdogGoroutines(); n != base+2 {
		t.Fatalf("%d watchdog goroutines with 2 plugins open, want %d", n, base+2)
	}
	if _, _, err := p.Partition([]byte("k"), 10); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() bool { return watchdogGoroutines() == base })
}

// watchdogGoroutines counts the goroutines running watchdog.run.
func watchdogGoroutines() int {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return bytes.Count(buf[:n], []byte("plugins.(*watchdog).run("))
		}
		buf = make([]byte, 2*len(buf))
	}
}

func TestWatchdogInterval(t *testing.T) {
	for _, tc := range []struct {
		call, set, want time.Duration
	}{
		{100 * time.Millisecond, 0, 25 * time.Millisecond},
		{time.Hour, 0, 50 * time.Millisecond},
		{2 * time.Millisecond, 0, time.Millisecond},
		{time.Hour, 3 * time.Millisecond, 3 * time.Millisecond},
	} {
		cfg := DefaultConfig()
		cfg.CallTimeout, cfg.WatchdogInterval = tc.call, tc.set
		if got := watchdogInterval(cfg); got != tc.want {
			t.Errorf("CallTimeout %v, WatchdogInterval %v: %v, want %v", tc.call, tc.set, got, tc.want)
		}
	}
}
