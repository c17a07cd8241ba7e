package plugins

import (
	"context"
	"fmt"
	"strings"

	"github.com/spangledb/spangle/plugins/partition"
)

// Open returns the partitioner a db's spec names: a built-in ("sequins",
// "hadoop", "murmur3"; "" means sequins) or a Wasm module, "wasm:<path>",
// loaded with OpenPartitioner (a relative path is relative to the working
// directory). The result of a "wasm:" spec is a *WasmPartitioner, which the
// caller closes; built-ins hold nothing.
func Open(ctx context.Context, spec string, cfg Config) (Partitioner, error) {
	path, err := wasmPath(spec)
	if err != nil {
		return nil, err
	}
	if path == "" {
		return Builtin(spec)
	}
	p, err := OpenPartitioner(ctx, path, cfg)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// CheckSpec reports whether spec names a built-in partitioner or a Wasm
// module, without opening the module: for validating configuration.
func CheckSpec(spec string) error {
	path, err := wasmPath(spec)
	if err != nil || path != "" {
		return err
	}
	_, err = Builtin(spec)
	return err
}

// wasmPath returns the module path of a "wasm:" spec, or "" for another
// spec.
func wasmPath(spec string) (string, error) {
	path, ok := strings.CutPrefix(spec, partition.WasmPrefix)
	switch {
	case !ok:
		return "", nil
	case path == "":
		return "", fmt.Errorf("%w: %q names no module (want wasm:<path>)", ErrUnknownPartitioner, spec)
	case strings.Contains(path, "://"):
		return "", fmt.Errorf("%w: %q: modules are loaded from files, not URLs", ErrUnknownPartitioner, spec)
	}
	return path, nil
}
