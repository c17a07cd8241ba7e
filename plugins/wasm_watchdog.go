package plugins

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero/sys"
)

// Bounds of the default Config.WatchdogInterval, CallTimeout/4.
const (
	minWatchdogInterval = time.Millisecond
	maxWatchdogInterval = 50 * time.Millisecond
)

// stopCause says why the watchdog stopped a call.
type stopCause int64

const (
	stopNone     stopCause = iota
	stopDeadline           // past CallTimeout (InitTimeout for _initialize)
	stopCanceled           // the caller's ctx is done
)

// exitCode is the exit code the watchdog closes a module with; the call
// fails with a sys.ExitError carrying it. The host classifies a call by
// the cause the watchdog recorded (callState.deadline), not by this code,
// which a guest could pass to proc_exit.
func (c stopCause) exitCode() uint32 {
	if c == stopCanceled {
		return sys.ExitCodeContextCanceled
	}
	return sys.ExitCodeDeadlineExceeded
}

// callState is what the watchdog knows of an instance's calls. It is part
// of the instance.
type callState struct {
	// deadline is 0 between calls. During a call it is the call's deadline
	// in nanoseconds since the watchdog's epoch, unique per call, so that
	// the watchdog, which claims a call by swapping its deadline for
	// -stopCause, cannot stop a call that has ended and been followed by
	// another. Negative once the watchdog has claimed the call.
	deadline atomic.Int64

	mu sync.Mutex // guards done
	// done is the caller's ctx.Done() during a call, if not nil.
	done <-chan struct{}

	// last is the deadline of the last call; owned by the caller.
	last int64
}

// canceled reports whether the running call's caller has given up.
func (c *callState) canceled() bool {
	c.mu.Lock()
	done := c.done
	c.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// watchdog stops the calls of one host that run past their deadline or
// whose caller's ctx is done: every interval it checks the instances that
// are in a call, and closes the module of each it stops
// (Module.CloseWithExitCode), which makes the guest's next loop header or
// function call fail the call with a sys.ExitError. It owns one goroutine,
// from start to stop, which sleeps while no call runs.
//
// A call is stopped between its deadline and one interval after it (plus
// scheduling delays). Calls pay two atomic operations, and a mutex when
// their ctx can be canceled; nothing else.
//
// Safe for concurrent use. Lock order: watchdog.mu, then callState.mu.
type watchdog struct {
	interval time.Duration
	epoch    time.Time // deadlines are nanoseconds since

	mu sync.Mutex // guards instances
	// instances are the host's instances that exist: added once
	// instantiated, removed when closed.
	instances []*instance

	// parked is set while the goroutine sleeps for want of calls to watch;
	// the first call to begin clears it and sends on wake (capacity 1).
	parked atomic.Bool
	wake   chan struct{}

	quit     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup

	// stopping holds the calls one check stops; owned by the goroutine.
	stopping []stopping
}

type stopping struct {
	in    *instance
	cause stopCause
}

// newWatchdog returns a watchdog checking every interval. It starts
// nothing: see start.
func newWatchdog(interval time.Duration) *watchdog {
	return &watchdog{
		interval: interval,
		epoch:    time.Now(),
		wake:     make(chan struct{}, 1),
		quit:     make(chan struct{}),
	}
}

// watchdogInterval returns cfg's WatchdogInterval, or its default:
// CallTimeout/4 within [1ms, 50ms].
func watchdogInterval(cfg Config) time.Duration {
	if cfg.WatchdogInterval > 0 {
		return cfg.WatchdogInterval
	}
	return min(max(cfg.CallTimeout/4, minWatchdogInterval), maxWatchdogInterval)
}

// start starts the goroutine. Call it once.
func (w *watchdog) start() { w.wg.Go(w.run) }

// stop stops the goroutine and waits for it to return. Calls that begin
// after it are not watched. Idempotent.
func (w *watchdog) stop() {
	w.stopOnce.Do(func() { close(w.quit) })
	w.wg.Wait()
}

// add watches in's calls; in.mod must be set.
func (w *watchdog) add(in *instance) {
	w.mu.Lock()
	w.instances = append(w.instances, in)
	w.mu.Unlock()
}

// remove stops watching in; it does nothing if in is not watched.
func (w *watchdog) remove(in *instance) {
	w.mu.Lock()
	if i := slices.Index(w.instances, in); i >= 0 {
		last := len(w.instances) - 1
		w.instances[i] = w.instances[last]
		w.instances[last] = nil
		w.instances = w.instances[:last]
	}
	w.mu.Unlock()
}

// now returns the monotonic time since the watchdog's epoch: one clock
// reading, where time.Now takes two (wall and monotonic).
func (w *watchdog) now() time.Duration { return time.Since(w.epoch) }

// begin marks the start of a call on in, which began at start (w.now()) and
// may run for timeout; done is the caller's ctx.Done(), or nil. Only in's
// caller calls it, then end.
func (w *watchdog) begin(in *instance, start, timeout time.Duration, done <-chan struct{}) {
	c := &in.watched
	if done != nil {
		c.mu.Lock()
		c.done = done
		c.mu.Unlock()
	}
	d := int64(start + timeout)
	if d <= c.last {
		d = c.last + 1
	}
	c.last = d
	c.deadline.Store(d)
	// Both sides are sequentially consistent: either run's second check
	// sees this call, or this sees parked set.
	if w.parked.Load() && w.parked.CompareAndSwap(true, false) {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// end marks the end of the call that begin marked, and returns why the
// watchdog stopped it (stopNone: it did not). A call the watchdog stopped
// has its module closed, or about to be: discard the instance.
func (w *watchdog) end(in *instance) stopCause {
	c := &in.watched
	cause := stopNone
	if d := c.deadline.Swap(0); d < 0 {
		cause = stopCause(-d)
	}
	if c.done != nil {
		c.mu.Lock()
		c.done = nil
		c.mu.Unlock()
	}
	return cause
}

func (w *watchdog) run() {
	t := time.NewTimer(w.interval)
	defer t.Stop()
	for {
		select {
		case <-w.quit:
			return
		case <-t.C:
		}
		if !w.check() {
			// No call runs: sleep until one begins. One that began before
			// parked was set is seen by the second check; one that begins
			// after sees parked.
			w.parked.Store(true)
			if !w.check() {
				select {
				case <-w.quit:
					return
				case <-w.wake:
				}
			}
			w.parked.Store(false)
		}
		t.Reset(w.interval)
	}
}

// check stops the calls past their deadline or canceled, and reports
// whether any call is running.
func (w *watchdog) check() (busy bool) {
	now := int64(w.now())
	w.mu.Lock()
	for _, in := range w.instances {
		c := &in.watched
		d := c.deadline.Load()
		if d <= 0 { // no call, or one stopped already
			continue
		}
		busy = true
		cause := stopNone
		switch {
		case now >= d:
			cause = stopDeadline
		case c.canceled():
			cause = stopCanceled
		default:
			continue
		}
		if c.deadline.CompareAndSwap(d, -int64(cause)) { // fails if the call has ended
			w.stopping = append(w.stopping, stopping{in, cause})
		}
	}
	w.mu.Unlock()
	// Outside the lock: closing a module takes a while. The caller may close
	// it too (it discards the instance); wazero closes a module once.
	for i, s := range w.stopping {
		_ = s.in.mod.CloseWithExitCode(context.Background(), s.cause.exitCode())
		w.stopping[i] = stopping{}
	}
	w.stopping = w.stopping[:0]
	return busy
}
