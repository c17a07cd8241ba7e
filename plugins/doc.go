// Package plugins holds the ways spangle can be customised per db: the
// Partitioner interface, the built-in partitioners (sequins, hadoop,
// murmur3), and the host of WebAssembly plugins, partitioners and value
// decoders, that run sandboxed in wazero (ABI spangle/v1, see ABI.md).
//
// The Partitioner interface, the built-ins and their hash functions are
// the leaf package plugins/partition (Partitioner and Builtin here are
// its): a program that routes keys with the built-ins, as the Go client
// does, imports it and not wazero.
//
// # Partitioners
//
// Builtin returns a built-in partitioner by name. Open maps a db's
// partitioner spec to a Partitioner: a built-in name, or "wasm:<path>" for
// a module, which OpenPartitioner loads into a *WasmPartitioner. CheckSpec
// validates a spec without loading anything. A WasmPartitioner's Identity is
// "wasm:sha256:<hex>" of the module bytes; PartitionBatch partitions many
// keys per call into the guest, for builds.
//
// # Decoders
//
// OpenDecoder loads a decoder module into a *WasmDecoder, whose Decode turns
// a stored value into what clients receive and whose ContentType names it.
//
// # The host
//
// Each module gets its own wazero runtime: compiled once (Config.CacheDir
// keeps compiled code across restarts), with a pool of at most
// Config.PoolSize instances created on demand; an instance serves one call
// at a time. Every call runs under a deadline (Config.CallTimeout) and a
// memory limit (Config.MemoryLimitPages). One watchdog goroutine per module
// checks the calls in progress every Config.WatchdogInterval and stops
// those past their deadline, or whose Decode ctx is done, by closing their
// instance: the guest notices at its next loop header, where wazero's
// WithCloseOnContextDone has compiled in a check. A guest that loops,
// traps, exits, exhausts its memory or returns a result out of range fails
// that call with an error (see errors.go); its instance is discarded and
// replaced on the next call. The guest sees only deterministic WASI: no
// files, environment, network, real clock or real randomness. Metrics go to
// Config.Registerer.
//
// # Caveats
//
//   - "sequins" hashes the unwrapped key bytes, not Java's UTF-16 string: it
//     matches Java's String.hashCode only for ASCII keys.
//   - "hadoop" matches Hadoop's default HashPartitioner for Text and
//     BytesWritable keys only (WritableComparator.hashBytes).
//   - A call into a plugin costs the host about 170 ns besides the guest's
//     work (ABI.md, "Cost"). Builds should still use PartitionBatch, which
//     pays it once per 4096 keys.
//   - The guest checks in with the host at every backward jump (15-35 ns),
//     which Go guests do at every taken branch: see ABI.md, "Cost".
//   - A call is stopped between its deadline and one WatchdogInterval later
//     (default CallTimeout/4, within [1ms, 50ms]), plus scheduling delays;
//     likewise a Decode whose ctx is done.
//   - wazero starts a goroutine per call when a module is compiled with
//     WithCloseOnContextDone (about 1 µs). The host turns that off by
//     clearing a flag inside wazero's compiled module (wazero_internals.go),
//     which depends on wazero v1.12's internal types: should an upgrade
//     change them, calls pay the goroutine again, the host logs a warning
//     and TestCallsStartNoGoroutine fails. A module with a start section
//     keeps the goroutine (it bounds the start section with InitTimeout).
//   - Out of memory is inferred: a fault while the guest's memory is within
//     a page of the limit, or after it printed "out of memory", is
//     ErrPluginMemory; a guest that handles a failed allocation itself (and
//     returns an error) gives ErrPluginError or ErrBadResult.
//   - "wasm:" paths are files, relative to the working directory; URLs are
//     not supported.
//   - wazero keys its compilation cache by its own version, read from the
//     binary's build info. In a test binary of a package other than main it
//     reads "dev": never share a CacheDir between test runs of different
//     wazero versions.
//   - WasmPartitioner and WasmDecoder hold a runtime, compiled code and
//     instances (about 3 MiB each for a Go guest): Close them. Close waits
//     for the calls in flight until its context is done, then stops them.
package plugins
