package plugins

import "errors"

var (
	// ErrUnknownPartitioner: a partitioner name that is neither built in nor a plugin.
	ErrUnknownPartitioner = errors.New("plugins: unknown partitioner")
	// ErrWasmUnsupported: WebAssembly plugins are not available in this build yet.
	ErrWasmUnsupported = errors.New("plugins: wasm plugins are not supported yet")
)
