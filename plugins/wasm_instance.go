package plugins

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// stackWords is the length of an instance's call stack: the ABI's widest
// function takes 5 parameters; 16 words (128 bytes, a size class of its own)
// keep two instances' stacks off one cache line.
const stackWords = 16

// minScratch is the smallest guest buffer an instance allocates.
const minScratch = 256

// instance is one instantiated module. It serves one call at a time: the
// caller that took it from the pool owns every field but those mu guards.
type instance struct {
	h     *host
	mod   api.Module
	mem   api.Memory
	fns   [numFns]api.Function // nil for functions not exported
	stack []uint64             // params and results of every call
	out   headWriter           // what the guest wrote to stdout/stderr in the current call

	// buf is a guest buffer from spangle_alloc that holds keys and values
	// passed in, reused while they fit; bufCap is its size.
	buf, bufCap uint32

	// bad marks an instance that faulted: release discards it.
	bad bool

	// timer stops a call that runs past its deadline.
	timer *time.Timer

	mu sync.Mutex // guards running, deadline and killed, shared with timer
	// running is true during a call; deadline is that call's.
	running  bool
	deadline time.Time
	// killed is set when timer closed the module during a call.
	killed bool
}

// newInstance instantiates the module and runs its _initialize, within
// InitTimeout. ctx cancels it too.
func (h *host) newInstance(ctx context.Context) (*instance, error) {
	in := &instance{h: h, stack: make([]uint64, stackWords)}
	// The deadline covers a start section; _initialize has its timer.
	ictx, cancel := context.WithTimeout(ctx, h.cfg.InitTimeout)
	defer cancel()
	mod, err := h.rt.InstantiateModule(ictx, h.compiled, h.modCfg.WithStdout(&in.out).WithStderr(&in.out))
	if err == nil && mod.IsClosed() { // a start section that called proc_exit(0)
		err = sys.NewExitError(0)
	}
	if err != nil {
		var exit *sys.ExitError
		if errors.As(err, &exit) {
			return nil, in.classify(fnInitialize, err, false, ctx)
		}
		h.metrics.errors[kindInit].Inc()
		return nil, fmt.Errorf("%w: %s: instantiate: %v", ErrBadModule, h.path, firstLine(err.Error()))
	}
	in.mod, in.mem = mod, mod.ExportedMemory("memory")
	for f := range numFns {
		if h.exported[f] {
			in.fns[f] = mod.ExportedFunction(abiFuncs[f].name)
		}
	}
	in.timer = time.AfterFunc(time.Hour, in.expire)
	in.timer.Stop()
	if in.fns[fnInitialize] != nil {
		if err := in.callWithin(ctx, fnInitialize, h.cfg.InitTimeout); err != nil {
			in.close()
			return nil, err
		}
	}
	return in, nil
}

// close closes the instance's module; the instance must not run again.
func (in *instance) close() {
	if in.timer != nil {
		in.timer.Stop()
	}
	if in.mod != nil {
		_ = in.mod.Close(context.Background())
	}
}

// call runs f on in.stack within CallTimeout. ctx may cancel it too. A fault
// marks the instance bad and returns the classified error.
func (in *instance) call(ctx context.Context, f fn) error {
	return in.callWithin(ctx, f, in.h.cfg.CallTimeout)
}

func (in *instance) callWithin(ctx context.Context, f fn, timeout time.Duration) error {
	m := in.h.metrics
	in.out.reset()
	start := time.Now()
	in.mu.Lock()
	in.running, in.deadline = true, start.Add(timeout)
	in.mu.Unlock()
	// A reused timer rather than context.WithTimeout: no allocation, and
	// about 0.5 µs less per call.
	in.timer.Reset(timeout)
	err := in.fns[f].CallWithStack(ctx, in.stack)
	in.timer.Stop()
	in.mu.Lock()
	killed := in.killed
	in.running = false
	in.mu.Unlock()
	m.calls[f].Inc()
	m.seconds[f].Observe(time.Since(start).Seconds())
	if err == nil && !killed {
		return nil
	}
	return in.fault(f, err, killed, ctx)
}

// expire runs on the timer's goroutine: it stops the call in progress if
// it is past its deadline. A stale firing (the call it was set for has
// ended, and another may have begun) finds running false or the new
// deadline ahead, and does nothing.
func (in *instance) expire() {
	in.mu.Lock()
	kill := in.running && !in.killed && !time.Now().Before(in.deadline)
	if kill {
		in.killed = true
	}
	in.mu.Unlock()
	if kill {
		// With WithCloseOnContextDone, closing the module stops its
		// running call, which returns a sys.ExitError.
		_ = in.mod.CloseWithExitCode(context.Background(), sys.ExitCodeDeadlineExceeded)
	}
}

// fault marks the instance bad, counts and logs the fault, and returns it
// classified.
func (in *instance) fault(f fn, err error, killed bool, ctx context.Context) error {
	in.bad = true
	in.h.metrics.replaced.Inc()
	return in.classify(f, err, killed, ctx)
}

func (in *instance) classify(f fn, err error, killed bool, ctx context.Context) error {
	h := in.h
	var exit *sys.ExitError
	isExit := errors.As(err, &exit)
	var kind string
	var wrapped error
	switch {
	case killed || isExit && exit.ExitCode() == sys.ExitCodeDeadlineExceeded && ctx.Err() == nil:
		kind, wrapped = kindTimeout, ErrPluginTimeout
		err = fmt.Errorf("stopped after %v", h.cfg.CallTimeout)
		if f == fnInitialize {
			err = fmt.Errorf("stopped after %v (InitTimeout)", h.cfg.InitTimeout)
		}
	case isExit && ctx.Err() != nil:
		kind, wrapped, err = kindCanceled, ctx.Err(), errors.New("stopped")
	case in.outOfMemory():
		kind, wrapped = kindMemory, ErrPluginMemory
	case isExit:
		kind, wrapped = kindExit, ErrPluginExit
	default:
		kind, wrapped = kindTrap, ErrPluginTrap
	}
	h.metrics.errors[kind].Inc()
	out := in.out.String()
	h.log.Warn("plugins: instance fault; discarded", "func", abiFuncs[f].name, "kind", kind, "err", err, "output", out)
	msg := firstLine(err.Error())
	if line := firstLine(strings.TrimSpace(out)); line != "" {
		msg += fmt.Sprintf(" (guest output: %q)", line)
	}
	if wrapped == ErrPluginTimeout || wrapped == ErrPluginMemory || wrapped == ErrPluginExit || wrapped == ErrPluginTrap {
		return fmt.Errorf("%w: %s: %s: %s", wrapped, h.path, abiFuncs[f].name, msg)
	}
	return fmt.Errorf("plugins: %s: %s: %s: %w", h.path, abiFuncs[f].name, msg, wrapped)
}

// outOfMemory reports whether the instance's fault looks like the guest ran
// out of memory: its memory is within a page of the limit, or it said so (a
// Go guest prints "fatal error: out of memory" and exits).
func (in *instance) outOfMemory() bool {
	if in.mem != nil && uint64(in.mem.Size())+65536 > uint64(in.h.cfg.MemoryLimitPages)*65536 {
		return true
	}
	return bytes.Contains(in.out.b, []byte("out of memory"))
}

// badResult marks the instance bad and returns an ErrBadResult for f.
func (in *instance) badResult(f fn, format string, args ...any) error {
	in.bad = true
	in.h.metrics.errors[kindBad].Inc()
	in.h.metrics.replaced.Inc()
	msg := fmt.Sprintf(format, args...)
	in.h.log.Warn("plugins: bad result; instance discarded", "func", abiFuncs[f].name, "err", msg)
	return fmt.Errorf("%w: %s: %s: %s", ErrBadResult, in.h.path, abiFuncs[f].name, msg)
}

// guestError returns the ErrPluginError of a negative result; the instance
// stays in the pool.
func (in *instance) guestError(f fn, code int64) error {
	in.h.metrics.errors[kindError].Inc()
	return fmt.Errorf("%w: %s: %s returned %d", ErrPluginError, in.h.path, abiFuncs[f].name, code)
}

// scratch returns in.buf, first growing it to hold size bytes.
func (in *instance) scratch(size int) (uint32, error) {
	if in.buf != 0 && uint64(size) <= uint64(in.bufCap) {
		return in.buf, nil
	}
	limit := uint64(in.h.cfg.MemoryLimitPages) * 65536
	if uint64(size) >= limit {
		return 0, fmt.Errorf("%w: %s: %d bytes do not fit in the plugin's memory limit", ErrPluginMemory, in.h.path, size)
	}
	want := uint64(minScratch)
	for want < uint64(size) {
		want *= 2
	}
	if want > limit/4 {
		want = uint64(size)
	}
	if in.buf != 0 && in.fns[fnFree] != nil {
		in.stack[0], in.stack[1] = uint64(in.buf), uint64(in.bufCap)
		if err := in.call(context.Background(), fnFree); err != nil {
			return 0, err
		}
	}
	in.buf, in.bufCap = 0, 0
	in.stack[0] = uint64(want)
	if err := in.call(context.Background(), fnAlloc); err != nil {
		return 0, err
	}
	ptr := api.DecodeU32(in.stack[0])
	if ptr == 0 {
		in.bad = true
		in.h.metrics.errors[kindMemory].Inc()
		in.h.metrics.replaced.Inc()
		return 0, fmt.Errorf("%w: %s: spangle_alloc(%d) returned 0", ErrPluginMemory, in.h.path, want)
	}
	if uint64(ptr)+want > uint64(in.mem.Size()) {
		return 0, in.badResult(fnAlloc, "spangle_alloc(%d) returned %#x, beyond the memory's %d bytes", want, ptr, in.mem.Size())
	}
	in.buf, in.bufCap = ptr, uint32(want)
	return ptr, nil
}

// write copies p into the guest's scratch buffer and returns its address.
func (in *instance) write(p []byte) (uint32, error) {
	ptr, err := in.scratch(len(p))
	if err != nil {
		return 0, err
	}
	if !in.mem.Write(ptr, p) { // cannot happen: memory never shrinks
		return 0, in.badResult(fnAlloc, "buffer %#x+%d out of memory", ptr, len(p))
	}
	return ptr, nil
}

// readPacked returns a copy of the guest memory that a result of f packs as
// (ptr << 32) | len, after checking its bounds.
func (in *instance) readPacked(f fn, packed uint64) ([]byte, error) {
	ptr, n := uint32(packed>>32), uint32(packed)
	b, ok := in.mem.Read(ptr, n)
	if !ok {
		return nil, in.badResult(f, "returned %#x+%d, beyond the memory's %d bytes", ptr, n, in.mem.Size())
	}
	return bytes.Clone(b[:n:n]), nil
}

// headWriter keeps the first bytes the guest writes to stdout and stderr
// during a call: a Go guest's panic message comes first. Not safe for
// concurrent use (an instance runs one call at a time).
type headWriter struct{ b []byte }

const headSize = 1024

func (w *headWriter) Write(p []byte) (int, error) {
	if room := headSize - len(w.b); room > 0 {
		w.b = append(w.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (w *headWriter) reset()         { w.b = w.b[:0] }
func (w *headWriter) String() string { return string(w.b) }

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
