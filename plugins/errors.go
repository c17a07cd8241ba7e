package plugins

import (
	"errors"

	"github.com/spangledb/spangle/plugins/partition"
)

// Errors of partitioner names and configuration.
var (
	// ErrUnknownPartitioner: a partitioner name that is neither built in nor
	// a plugin ("wasm:<path>"). It is partition.ErrUnknown, which Builtin
	// returns.
	ErrUnknownPartitioner = partition.ErrUnknown
	// ErrConfig: a Config field out of range.
	ErrConfig = errors.New("plugins: invalid config")
	// ErrClosed: a call on a plugin after Close.
	ErrClosed = errors.New("plugins: plugin closed")
)

// Errors of loading a Wasm module (OpenPartitioner, OpenDecoder). They are
// wrapped with the module's path.
var (
	// ErrBadModule: the file is not a valid WebAssembly module, or it
	// cannot be instantiated (for example, it is a WASI command, not a
	// reactor).
	ErrBadModule = errors.New("plugins: bad wasm module")
	// ErrMissingExport: the module lacks an export the ABI requires, or
	// exports it with the wrong type.
	ErrMissingExport = errors.New("plugins: missing or mistyped export")
	// ErrForbiddenImport: the module imports something other than a WASI
	// preview 1 function.
	ErrForbiddenImport = errors.New("plugins: forbidden import")
)

// Faults of a plugin call, wrapped with the module's identity and the
// function called. Each is an error of that call only; every fault but
// ErrPluginError discards the instance that made it.
var (
	// ErrPluginTimeout: the call ran past Config.CallTimeout (or the
	// instantiation past Config.InitTimeout) and was stopped.
	ErrPluginTimeout = errors.New("plugins: plugin call timed out")
	// ErrPluginMemory: the guest ran out of memory at
	// Config.MemoryLimitPages, or needs more than that to load.
	ErrPluginMemory = errors.New("plugins: plugin out of memory")
	// ErrPluginTrap: the guest trapped (unreachable, out-of-bounds access,
	// division by zero, stack overflow...).
	ErrPluginTrap = errors.New("plugins: plugin trapped")
	// ErrPluginExit: the guest exited (WASI proc_exit), as a Go guest does
	// when it panics.
	ErrPluginExit = errors.New("plugins: plugin exited")
	// ErrBadResult: the guest returned something the ABI forbids: a
	// partition out of [0, n), a pointer or length outside its memory, an
	// unusable content type.
	ErrBadResult = errors.New("plugins: plugin returned a bad result")
	// ErrPluginError: the guest reported an error (a negative result), for
	// example a value it cannot decode. The instance is kept.
	ErrPluginError = errors.New("plugins: plugin reported an error")
)
