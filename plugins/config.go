package plugins

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of Config.
const (
	DefaultCallTimeout      = 100 * time.Millisecond
	DefaultInitTimeout      = 5 * time.Second
	DefaultMemoryLimitPages = 512 // 32 MiB
)

// maxMemoryLimitPages is Wasm's 4 GiB address space, in 64 KiB pages.
const maxMemoryLimitPages = 65536

// Config configures the host of Wasm plugins. Start from DefaultConfig:
// every field's comment states its default, which DefaultConfig holds, and
// Validate refuses a zero CallTimeout, InitTimeout, MemoryLimitPages or
// PoolSize (the zero value is not usable). CacheDir "", WatchdogInterval 0
// (derived from CallTimeout) and a nil Logger or Registerer are valid, as
// their comments say.
type Config struct {
	// Logger receives faults of plugin instances (with the guest's last
	// output) and load events. Default nil: discard.
	Logger *slog.Logger

	// CacheDir holds compiled modules across restarts: a Go guest compiles
	// in about 0.5 s, and loads from the cache in about 30 ms. Entries are
	// keyed by the module bytes and the wazero version. "" means in-memory
	// only. Default <user cache dir>/spangle/wasm when the user cache dir
	// is known, else "".
	CacheDir string

	// CallTimeout bounds one call into the guest (a key, a batch chunk of
	// at most 4096 keys, a value); a call past it is stopped, returns
	// ErrPluginTimeout, and its instance is discarded. Default 100ms.
	CallTimeout time.Duration

	// WatchdogInterval is how often the host checks the calls in progress
	// against their deadline (CallTimeout, InitTimeout) and Decode's ctx: a
	// call is stopped between its deadline, or its ctx being done, and one
	// interval later, plus scheduling delays. One goroutine per module does
	// the checks, and sleeps while no call runs. Default 0: CallTimeout/4,
	// within [1ms, 50ms].
	WatchdogInterval time.Duration

	// InitTimeout bounds the instantiation of one instance, including the
	// guest's _initialize (a Go guest takes about 4 ms). Default 5s.
	InitTimeout time.Duration

	// MemoryLimitPages bounds each instance's linear memory, in 64 KiB
	// pages. A module that needs more to load fails to open; a guest that
	// grows past it fails the call with ErrPluginMemory. A Go guest declares
	// 32 pages and needs about 37 to start. Default 512 (32 MiB), at most
	// 65536 (4 GiB).
	MemoryLimitPages uint32

	// PoolSize bounds the instances of one module, so the calls running at
	// once; further callers wait. Instances are created on demand.
	// Default GOMAXPROCS.
	PoolSize int

	// Registerer receives the plugin metrics (spangle_plugin_*). Several
	// plugins may share one: their series differ by the module label.
	// Default nil: none registered.
	Registerer prometheus.Registerer
}

// DefaultConfig returns the defaults, with CacheDir under the user cache
// directory (or "" when there is none).
func DefaultConfig() Config {
	c := Config{
		CallTimeout:      DefaultCallTimeout,
		InitTimeout:      DefaultInitTimeout,
		MemoryLimitPages: DefaultMemoryLimitPages,
		PoolSize:         runtime.GOMAXPROCS(0),
	}
	if dir, err := os.UserCacheDir(); err == nil {
		c.CacheDir = filepath.Join(dir, "spangle", "wasm")
	}
	return c
}

// Validate reports a field out of range, wrapping ErrConfig and naming the
// field. It changes nothing: a field left at zero where DefaultConfig has
// another value is an error (start from DefaultConfig).
func (c Config) Validate() error {
	switch {
	case c.CallTimeout <= 0:
		return fmt.Errorf("%w: CallTimeout %v: want a positive duration", ErrConfig, c.CallTimeout)
	case c.WatchdogInterval < 0:
		return fmt.Errorf("%w: WatchdogInterval %v is negative (0: derived from CallTimeout)", ErrConfig, c.WatchdogInterval)
	case c.InitTimeout <= 0:
		return fmt.Errorf("%w: InitTimeout %v: want a positive duration", ErrConfig, c.InitTimeout)
	case c.MemoryLimitPages == 0 || c.MemoryLimitPages > maxMemoryLimitPages:
		return fmt.Errorf("%w: MemoryLimitPages %d is not within 1..%d (4 GiB)", ErrConfig, c.MemoryLimitPages, maxMemoryLimitPages)
	case c.PoolSize < 1:
		return fmt.Errorf("%w: PoolSize %d: want at least 1", ErrConfig, c.PoolSize)
	}
	return nil
}
