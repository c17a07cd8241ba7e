package plugins

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
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
// caller that took it from the pool owns every field but watched, which it
// shares with the host's watchdog.
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

	// watched is shared with the host's watchdog, which stops calls past
	// their deadline.
	watched callState
}

// newInstance instantiates the module and runs its _initialize, within
// InitTimeout. ctx cancels it too.
func (h *host) newInstance(ctx context.Context) (*instance, error) {
	in := &instance{h: h, stack: make([]uint64, stackWords)}
	// The deadline covers a start section (wazero's per-call goroutine
	// watches it: see skipCallGoroutine); the watchdog covers _initialize.
	ictx, cancel := context.WithTimeout(ctx, h.cfg.InitTimeout)
	defer cancel()
	mod, err := h.rt.InstantiateModule(ictx, h.compiled, h.modCfg.WithStdout(&in.out).WithStderr(&in.out))
	if err == nil && mod.IsClosed() { // a start section that called proc_exit(0)
		err = sys.NewExitError(0)
	}
	if err != nil {
		var exit *sys.ExitError
		if errors.As(err, &exit) {
			return nil, in.classify(fnInitialize, err, wazeroStop(exit, ctx), ctx)
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
	h.watch.add(in)
	if in.fns[fnInitialize] != nil {
		if err := in.callWithin(ctx, fnInitialize, h.cfg.InitTimeout); err != nil {
			in.close()
			return nil, err
		}
	}
	return in, nil
}

// wazeroStop returns why wazero's own per-call goroutine stopped a start
// section (it closes the module with these exit codes when ictx is done):
// past InitTimeout, or ctx done.
func wazeroStop(exit *sys.ExitError, ctx context.Context) stopCause {
	switch code := exit.ExitCode(); {
	case code != sys.ExitCodeDeadlineExceeded && code != sys.ExitCodeContextCanceled:
		return stopNone
	case ctx.Err() != nil:
		return stopCanceled
	case code == sys.ExitCodeDeadlineExceeded:
		return stopDeadline
	}
	return stopNone
}

// close closes the instance's module; the instance must not run again.
func (in *instance) close() {
	if in.mod != nil {
		in.h.watch.remove(in)
		_ = in.mod.Close(context.Background())
	}
}

// call runs f on in.stack within CallTimeout. ctx may cancel it too. A fault
// marks the instance bad and returns the classified error.
func (in *instance) call(ctx context.Context, f fn) error {
	return in.callWithin(ctx, f, in.h.cfg.CallTimeout)
}

// callWithin runs f within timeout. The guest runs under
// context.Background(): the host's watchdog, not wazero, stops it at its
// deadline or when ctx is done (see wasm_watchdog.go).
func (in *instance) callWithin(ctx context.Context, f fn, timeout time.Duration) error {
	m, w := in.h.metrics, in.h.watch
	in.out.reset()
	start := w.now()
	w.begin(in, start, timeout, ctx.Done())
	err := in.fns[f].CallWithStack(context.Background(), in.stack)
	stopped := w.end(in)
	m.calls[f].Inc()
	m.seconds[f].Observe((w.now() - start).Seconds())
	if err == nil && stopped == stopNone {
		return nil
	}
	return in.fault(f, err, stopped, ctx)
}

// fault marks the instance bad, counts and logs the fault, and returns it
// classified.
func (in *instance) fault(f fn, err error, stopped stopCause, ctx context.Context) error {
	in.bad = true
	in.h.metrics.replaced.Inc()
	return in.classify(f, err, stopped, ctx)
}

// classify returns the error of a failed call of f: stopped says whether
// (and why) it was stopped, err is what the call returned.
func (in *instance) classify(f fn, err error, stopped stopCause, ctx context.Context) error {
	h := in.h
	var exit *sys.ExitError
	isExit := errors.As(err, &exit)
	var kind string
	var wrapped error
	switch {
	case stopped == stopDeadline:
		kind, wrapped = kindTimeout, ErrPluginTimeout
		err = fmt.Errorf("stopped after %v", h.cfg.CallTimeout)
		if f == fnInitialize {
			err = fmt.Errorf("stopped after %v (InitTimeout)", h.cfg.InitTimeout)
		}
	case stopped == stopCanceled:
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
