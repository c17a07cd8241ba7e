package plugins

import (
	"reflect"
	"unsafe"

	"github.com/tetratelabs/wazero/api"
)

// Where the types that skipCallGoroutine reaches into live in wazero.
const (
	wazeroWasmPkg   = "github.com/tetratelabs/wazero/internal/wasm"
	wazeroWazevoPkg = "github.com/tetratelabs/wazero/internal/engine/wazevo"
)

// skipCallGoroutine stops wazero from starting a goroutine for every call
// into the module that mod is an instance of, and reports whether it did.
// It must run before the module's instances are shared with other
// goroutines, and only for a module without a start section (see below).
//
// Why: with RuntimeConfig.WithCloseOnContextDone(true), wazero v1.12
// compiles two things into the module, both keyed on one flag of its
// compiled module (wazevo's compiledModule.ensureTermination):
//
//   - at every loop header, machine code that exits to Go, which fails the
//     call if the module has been closed (Module.CloseWithExitCode). This is
//     what stops a looping guest, and what keeps it preemptible: without it
//     a loop in machine code blocks the garbage collector's stop-the-world,
//     and so the whole process;
//   - in callEngine.callWithStack, at every call, a goroutine that waits for
//     ctx.Done() and closes the module. It is started even when ctx.Done()
//     is nil, and costs about 1 µs per call.
//
// The host needs the first and replaces the second with its watchdog (one
// goroutine per host, see wasm_watchdog.go). The flag is read at compile
// time for the first and at every call for the second, so clearing it once
// the module is compiled keeps the checks in the code and drops the
// goroutine. It is also read by an instantiation that runs a start section:
// such a module keeps the goroutine, which bounds its start section with
// InitTimeout.
//
// This reaches into wazero's internal types by reflection, checking each
// type's package, name and kind on the way: with a wazero whose internals
// differ (or the interpreter, on platforms without the compiler) it changes
// nothing and returns false, and every call pays the goroutine again, which
// is slower but as safe. TestCallsStartNoGoroutine fails in that case.
//
// The danger is the other way round: a wazero that keeps the field but
// reads it elsewhere, for example to decide at run time whether the loop
// checks stop the guest, would have the stop silently disabled by this
// write. TestWazeroReadsTerminationFlagAtCallsOnly pins the places wazero's
// source reads the field (it fails on any other), and
// TestClearedFlagStillStopsLoop checks, with the field cleared, that a
// looping guest is stopped at its deadline.
//
// No public API serves: WithCloseOnContextDone is the only way to have the
// loop checks compiled in, and it brings the goroutine per call with it
// (about 1 µs, against 35 ns for a whole call into a small module).
func skipCallGoroutine(mod api.Module) (ok bool) {
	defer func() {
		if recover() != nil { // a shape reflect did not expect
			ok = false
		}
	}()
	inst := reflect.ValueOf(mod)
	if !isPtrToStruct(inst, wazeroWasmPkg, "ModuleInstance") {
		return false
	}
	eng := inst.Elem().FieldByName("Engine")
	if eng.Kind() != reflect.Interface || eng.IsNil() {
		return false
	}
	modEng := eng.Elem()
	if !isPtrToStruct(modEng, wazeroWazevoPkg, "moduleEngine") {
		return false
	}
	compiled := modEng.Elem().FieldByName("parent")
	if !isPtrToStruct(compiled, wazeroWazevoPkg, "compiledModule") {
		return false
	}
	flag := compiled.Elem().FieldByName("ensureTermination")
	if flag.Kind() != reflect.Bool || !flag.Bool() || !flag.CanAddr() {
		return false // not compiled with the checks: keep wazero's way
	}
	*(*bool)(unsafe.Pointer(flag.UnsafeAddr())) = false
	return true
}

// isPtrToStruct reports whether v is a non-nil pointer to the struct type
// pkg.name.
func isPtrToStruct(v reflect.Value, pkg, name string) bool {
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return false
	}
	t := v.Type().Elem()
	return t.Kind() == reflect.Struct && t.PkgPath() == pkg && t.Name() == name
}
