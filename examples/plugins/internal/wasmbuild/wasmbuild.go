// Package wasmbuild builds the example plugins, Go packages of
// examples/plugins, into Wasm modules with the standard Go toolchain, for
// their tests:
//
//	GOOS=wasip1 GOARCH=wasm go build -trimpath -buildmode=c-shared -o OUT DIR
//
// -buildmode=c-shared makes a WASI reactor (it exports _initialize, which
// the host calls once per instance) rather than a command, whose _start
// would run main and exit.
package wasmbuild

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/spangledb/spangle/plugins"
)

// ErrNoGo: the go command is not on PATH.
var ErrNoGo = errors.New("wasmbuild: the go command is not on PATH")

// Build compiles the Go main package in dir into the Wasm module out.
func Build(ctx context.Context, dir, out string) error {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return ErrNoGo
	}
	cmd := exec.CommandContext(ctx, goCmd, "build", "-trimpath", "-buildmode=c-shared", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("wasmbuild: build %s: %v\n%s", dir, err, b)
	}
	return nil
}

// Guest is an example module built at most once per test binary, on first
// use, into a temporary directory that Cleanup removes (call it from
// TestMain after m.Run). The zero value builds the package in the working
// directory (a test's own package). Safe for concurrent use.
type Guest struct {
	// Dir is the package to build; "" means ".".
	Dir string

	once sync.Once
	tmp  string
	path string
	err  error
}

// Path returns the built module's path, building it first. It skips tb when
// go is not on PATH, and fails it when the build fails.
func (g *Guest) Path(tb testing.TB) string {
	tb.Helper()
	g.once.Do(g.build)
	if errors.Is(g.err, ErrNoGo) {
		tb.Skip("go is not on PATH: cannot build the Wasm example (GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared)")
	}
	if g.err != nil {
		tb.Fatal(g.err)
	}
	return g.path
}

// CacheDir returns a directory for the compilation cache of the module's
// tests, shared by every test of the binary.
func (g *Guest) CacheDir(tb testing.TB) string {
	tb.Helper()
	return filepath.Join(filepath.Dir(g.Path(tb)), "cache")
}

func (g *Guest) build() {
	g.tmp, g.err = os.MkdirTemp("", "spangle-wasm-example-")
	if g.err != nil {
		return
	}
	dir := g.Dir
	if dir == "" {
		dir = "."
	}
	name := filepath.Base(dir)
	if abs, err := filepath.Abs(dir); err == nil {
		name = filepath.Base(abs)
	}
	g.path = filepath.Join(g.tmp, name+".wasm")
	g.err = Build(context.Background(), dir, g.path)
}

// Cleanup removes what Path built.
func (g *Guest) Cleanup() {
	if g.tmp != "" {
		os.RemoveAll(g.tmp)
	}
}

// config returns the plugin host configuration for the guest's tests: the
// defaults, with the compilation cache shared by the test binary.
func (g *Guest) config(tb testing.TB) plugins.Config {
	cfg := plugins.DefaultConfig()
	cfg.CacheDir = g.CacheDir(tb)
	cfg.CallTimeout = 10 * time.Second // a loaded CI machine under -race
	return cfg
}

// OpenPartitioner builds the guest (once) and opens it as a partitioner,
// closed when tb ends.
func (g *Guest) OpenPartitioner(tb testing.TB) *plugins.WasmPartitioner {
	tb.Helper()
	p, err := plugins.OpenPartitioner(context.Background(), g.Path(tb), g.config(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Close(context.Background()) })
	return p
}

// OpenDecoder builds the guest (once) and opens it as a decoder, closed
// when tb ends.
func (g *Guest) OpenDecoder(tb testing.TB) *plugins.WasmDecoder {
	tb.Helper()
	d, err := plugins.OpenDecoder(context.Background(), g.Path(tb), g.config(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Close(context.Background()) })
	return d
}
