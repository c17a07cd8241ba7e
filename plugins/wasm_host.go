package plugins

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// fn names a function of the ABI (spangle/v1).
type fn int

const (
	fnAlloc fn = iota
	fnFree
	fnPartition
	fnBatch
	fnPrefix
	fnDecode
	fnContentType
	fnInitialize
	numFns
)

const (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

// abiFuncs are the exports of the ABI and their types.
var abiFuncs = [numFns]struct {
	name            string
	params, results []api.ValueType
}{
	fnAlloc:       {"spangle_alloc", []api.ValueType{i32}, []api.ValueType{i32}},
	fnFree:        {"spangle_free", []api.ValueType{i32, i32}, nil},
	fnPartition:   {"spangle_partition", []api.ValueType{i32, i32, i32}, []api.ValueType{i32}},
	fnBatch:       {"spangle_partition_batch", []api.ValueType{i32, i32, i32, i32, i32}, []api.ValueType{i32}},
	fnPrefix:      {"spangle_prefix_partition", []api.ValueType{i32, i32, i32}, []api.ValueType{i32}},
	fnDecode:      {"spangle_decode", []api.ValueType{i32, i32}, []api.ValueType{i64}},
	fnContentType: {"spangle_content_type", nil, []api.ValueType{i64}},
	fnInitialize:  {"_initialize", nil, nil},
}

// guestArg0 is the guest's only argument (argv[0]): the same for every
// module and path, so that nothing but the module bytes decides a result.
const guestArg0 = "plugin"

// host is one loaded module: its runtime, compiled code and a pool of
// instances. WasmPartitioner and WasmDecoder are thin fronts to it. Safe for
// concurrent use.
type host struct {
	cfg      Config
	log      *slog.Logger
	path     string
	identity string
	metrics  *metrics

	rt       wazero.Runtime
	cache    wazero.CompilationCache // nil: in-memory only
	compiled wazero.CompiledModule
	modCfg   wazero.ModuleConfig
	exported [numFns]bool

	// slots holds one entry per instance that may exist: an idle instance,
	// or nil for one not created yet (or discarded after a fault). A caller
	// takes an entry and gives one back, so at most PoolSize calls run at
	// once and each instance serves one call at a time.
	slots chan *instance
	// done is closed when Close begins; callers waiting for an entry give up.
	done chan struct{}

	// watch stops calls past their deadline; its goroutine runs from
	// loadHost to close.
	watch *watchdog
	// noCallGoroutine says that wazero starts no goroutine per call (see
	// skipCallGoroutine); set by loadHost.
	noCallGoroutine bool

	closeOnce sync.Once
	closeErr  error
}

// loadHost reads, checks and compiles the module at path, and starts its
// first instance. required are the exports the caller needs besides memory
// and spangle_alloc.
func loadHost(ctx context.Context, path string, cfg Config, required ...fn) (_ *host, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	bin, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("plugins: %w", err)
	}
	sum := sha256.Sum256(bin)
	h := &host{
		cfg:      cfg,
		path:     path,
		identity: "wasm:sha256:" + hex.EncodeToString(sum[:]),
		slots:    make(chan *instance, cfg.PoolSize),
		done:     make(chan struct{}),
		watch:    newWatchdog(watchdogInterval(cfg)),
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h.log = log.With("module", path)
	info, err := scanModule(bin)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadModule, path, err)
	}
	if info.hasMem && info.memMin > cfg.MemoryLimitPages {
		return nil, fmt.Errorf("%w: %s: needs %d pages of memory at start, over the limit of %d (MemoryLimitPages)",
			ErrPluginMemory, path, info.memMin, cfg.MemoryLimitPages)
	}
	for _, im := range info.imports {
		if im.kind != importFunc || im.module != wasi_snapshot_preview1.ModuleName {
			kind, ok := kindNames[im.kind]
			if !ok {
				kind = fmt.Sprintf("kind %#x", im.kind)
			}
			return nil, fmt.Errorf("%w: %s imports %s %s.%s: a plugin may import only WASI preview 1 functions (%s)",
				ErrForbiddenImport, path, kind, im.module, im.name, wasi_snapshot_preview1.ModuleName)
		}
	}

	rcfg := wazero.NewRuntimeConfig().
		WithCloseOnContextDone(true). // without it a looping guest hangs the process
		WithMemoryLimitPages(cfg.MemoryLimitPages)
	if cfg.CacheDir != "" {
		if c, err := wazero.NewCompilationCacheWithDir(cfg.CacheDir); err != nil {
			h.log.Warn("plugins: compilation cache unusable; compiling in memory", "dir", cfg.CacheDir, "err", err)
		} else {
			h.cache = c
			rcfg = rcfg.WithCompilationCache(c)
		}
	}
	h.rt = wazero.NewRuntimeWithConfig(ctx, rcfg)
	h.watch.start()
	defer func() {
		if err != nil {
			h.watch.stop()
			h.closeRuntime()
		}
	}()
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, h.rt); err != nil {
		return nil, fmt.Errorf("plugins: %s: instantiate WASI: %w", path, err)
	}
	wasi := h.rt.Module(wasi_snapshot_preview1.ModuleName).ExportedFunctionDefinitions()
	for _, im := range info.imports {
		if _, ok := wasi[im.name]; !ok {
			return nil, fmt.Errorf("%w: %s imports %s.%s, which is not a WASI preview 1 function",
				ErrForbiddenImport, path, im.module, im.name)
		}
	}

	start := time.Now()
	if h.compiled, err = h.rt.CompileModule(ctx, bin); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadModule, path, err)
	}
	h.log.Debug("plugins: compiled", "identity", h.identity, "bytes", len(bin), "took", time.Since(start))
	if err := h.checkExports(required); err != nil {
		return nil, err
	}
	h.modCfg = wazero.NewModuleConfig().
		WithName("").        // anonymous: many instances of one module
		WithArgs(guestArg0). // no arguments, no environment
		WithStartFunctions() // _initialize is called like any export, under a deadline
	if h.metrics, err = newMetrics(cfg.Registerer, h.identity); err != nil {
		return nil, fmt.Errorf("plugins: %s: metrics: %w", path, err)
	}
	for range cfg.PoolSize {
		h.slots <- nil
	}
	// Start one instance now: a module that cannot start fails to open.
	in, err := h.acquire(ctx)
	if err != nil {
		return nil, err
	}
	// Then drop wazero's goroutine per call, while no other goroutine can
	// call. A start section runs at every instantiation: it needs it.
	if !info.hasStart {
		h.noCallGoroutine = skipCallGoroutine(in.mod)
		if !h.noCallGoroutine {
			h.log.Warn("plugins: wazero internals not as expected: each call into the plugin starts a goroutine (about 1 µs)")
		}
	}
	h.release(in)
	return h, nil
}

// checkExports checks the module's exports against the ABI.
func (h *host) checkExports(required []fn) error {
	if _, ok := h.compiled.ExportedMemories()["memory"]; !ok {
		return fmt.Errorf("%w: %s does not export its memory as \"memory\"", ErrMissingExport, h.path)
	}
	exports := h.compiled.ExportedFunctions()
	for f, want := range abiFuncs {
		def, ok := exports[want.name]
		if !ok {
			continue
		}
		if !slices.Equal(def.ParamTypes(), want.params) || !slices.Equal(def.ResultTypes(), want.results) {
			return fmt.Errorf("%w: %s exports %s as %s, want %s", ErrMissingExport, h.path, want.name,
				signature(def.ParamTypes(), def.ResultTypes()), signature(want.params, want.results))
		}
		h.exported[f] = true
	}
	for _, f := range append([]fn{fnAlloc}, required...) {
		if !h.exported[f] {
			return fmt.Errorf("%w: %s does not export %s", ErrMissingExport, h.path, abiFuncs[f].name)
		}
	}
	if _, ok := exports["_start"]; ok && !h.exported[fnInitialize] {
		return fmt.Errorf("%w: %s is a WASI command (it exports _start, not _initialize): build a reactor (Go: -buildmode=c-shared)",
			ErrBadModule, h.path)
	}
	return nil
}

func signature(params, results []api.ValueType) string {
	name := func(ts []api.ValueType) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = api.ValueTypeName(t)
		}
		return "(" + strings.Join(s, ", ") + ")"
	}
	return name(params) + " -> " + name(results)
}

// acquire takes an instance for one call, creating it if its slot is
// empty. It blocks while PoolSize callers hold instances, until ctx is done
// or the host closes. The caller gives the instance back with release.
func (h *host) acquire(ctx context.Context) (*instance, error) {
	var in *instance
	select {
	case in = <-h.slots: // an entry is free: cheaper than the select below
	default:
		select {
		case in = <-h.slots:
		case <-h.done:
			return nil, fmt.Errorf("%w: %s", ErrClosed, h.path)
		case <-ctx.Done():
			return nil, fmt.Errorf("plugins: %s: waiting for an instance: %w", h.path, ctx.Err())
		}
	}
	select {
	case <-h.done:
		h.slots <- in
		return nil, fmt.Errorf("%w: %s", ErrClosed, h.path)
	default:
	}
	if in == nil {
		var err error
		if in, err = h.newInstance(ctx); err != nil {
			h.slots <- nil
			return nil, err
		}
	}
	return in, nil
}

// release gives back an instance taken with acquire, discarding it if it
// faulted or the host is closing.
func (h *host) release(in *instance) {
	closing := false
	select {
	case <-h.done:
		closing = true
	default:
	}
	if in.bad || closing {
		in.close()
		in = nil
	}
	h.slots <- in // never blocks: the slot was taken by acquire
}

// close releases the host:
//
//  1. callers waiting for an instance, and later callers, get ErrClosed;
//  2. it waits for the calls in flight (each stopped by the watchdog at
//     CallTimeout) and closes their instances, until ctx is done;
//  3. it stops the watchdog and waits for its goroutine;
//  4. it closes the runtime, which stops any call still running (it
//     returns an error) and frees the compiled code;
//  5. it closes the compilation cache (the on-disk entries stay).
//
// It is idempotent: later calls return the first one's result.
func (h *host) close(ctx context.Context) error {
	h.closeOnce.Do(func() {
		close(h.done)
	wait:
		for range cap(h.slots) {
			select {
			case in := <-h.slots:
				if in != nil {
					in.close()
				}
			case <-ctx.Done():
				h.log.Warn("plugins: closing with calls in flight", "err", ctx.Err())
				break wait
			}
		}
		h.watch.stop()
		h.closeErr = h.closeRuntime()
	})
	return h.closeErr
}

func (h *host) closeRuntime() error {
	ctx := context.Background()
	err := h.rt.Close(ctx)
	if h.cache != nil {
		if e := h.cache.Close(ctx); err == nil {
			err = e
		}
	}
	if err != nil {
		return fmt.Errorf("plugins: %s: close: %w", h.path, err)
	}
	return nil
}
