package plugins

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestWazeroReadsTerminationFlagAtCallsOnly pins what skipCallGoroutine
// relies on in wazero's source: once a module is compiled, its compiled
// module's ensureTermination is read by callWithStack only (to start the
// goroutine per call); the loop-header checks were compiled from the
// runtime's setting, not from this field. It fails when an upgrade reads
// the field anywhere else (for example when the loop checks consult it at
// run time, which clearing it would silently disable): check that case,
// then update the list.
func TestWazeroReadsTerminationFlagAtCallsOnly(t *testing.T) {
	goTool, err := exec.LookPath("go") // go test puts GOROOT/bin first on PATH
	if err != nil {
		t.Fatalf("go tool: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-f", "{{.Dir}}", wazeroWazevoPkg).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", wazeroWazevoPkg, err)
	}
	dir := strings.TrimSpace(string(out))
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("wazevo sources in %q: %v", dir, err)
	}
	var uses []string // Func:line-free names of the functions that select the field
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "ensureTermination" {
					uses = append(uses, fn.Name.Name)
				}
				return true
			})
		}
	}
	slices.Sort(uses)
	// getCompiledModule sets the field on a module loaded from the
	// compilation cache, before the host clears it; callWithStack reads it
	// at every call.
	want := []string{"callWithStack", "getCompiledModule"}
	if !slices.Equal(uses, want) {
		t.Fatalf("wazevo selects compiledModule.ensureTermination in %v, want %v: check that skipCallGoroutine still only drops the goroutine per call (wazero_internals.go)", uses, want)
	}
}

// TestClearedFlagStillStopsLoop checks the behaviour skipCallGoroutine must
// keep: with the flag cleared, a guest looping in machine code is stopped
// at its deadline by the watchdog (the compiled loop-header checks see the
// module closed). The garbage collector is off meanwhile, so a loop that
// is not stopped (and so not preemptible) fails the test instead of
// freezing the process at the next collection.
func TestClearedFlagStillStopsLoop(t *testing.T) {
	cfg := testConfig(t)
	cfg.PoolSize = 1
	cfg.CallTimeout = 100 * time.Millisecond
	p, err := OpenPartitioner(context.Background(), "testdata/hostile.wasm", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	if !p.h.noCallGoroutine {
		t.Fatal("the flag was not cleared: skipCallGoroutine no longer matches wazero's internals")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	done := make(chan error, 1)
	go func() {
		_, _, err := p.Partition([]byte("loop"), 10)
		done <- err
	}()
	const margin = 10 * time.Second // -race on a loaded machine; a loop not stopped never ends
	select {
	case err := <-done:
		if !errors.Is(err, ErrPluginTimeout) {
			t.Fatalf("looping call: %v, want ErrPluginTimeout", err)
		}
	case <-time.After(cfg.CallTimeout + margin):
		// The guest still loops and cannot be preempted: end the process
		// rather than let the next collection freeze it.
		panic("a looping guest was not stopped with ensureTermination cleared: wazero no longer compiles the loop checks from the runtime's setting (wazero_internals.go)")
	}
}
