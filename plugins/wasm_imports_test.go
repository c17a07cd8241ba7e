package plugins

import (
	"os"
	"path/filepath"
	"testing"
)

func TestScanModule(t *testing.T) {
	for _, tc := range []struct {
		module  string
		imports []wasmImport
		memMin  uint32
		hasMem  bool
	}{
		{"murmur3", nil, 1, true},
		{"big_memory", nil, 1000, true},
		{"env_import", []wasmImport{{"env", "foo", importFunc}}, 1, true},
		{"import_memory", []wasmImport{{"env", "memory", importMemory}}, 0, false},
		{"hostile", []wasmImport{
			{"wasi_snapshot_preview1", "proc_exit", importFunc},
			{"wasi_snapshot_preview1", "fd_write", importFunc},
			{"wasi_snapshot_preview1", "fd_prestat_get", importFunc},
			{"wasi_snapshot_preview1", "path_open", importFunc},
			{"wasi_snapshot_preview1", "environ_sizes_get", importFunc},
			{"wasi_snapshot_preview1", "args_sizes_get", importFunc},
			{"wasi_snapshot_preview1", "clock_time_get", importFunc},
		}, 1, true},
	} {
		t.Run(tc.module, func(t *testing.T) {
			bin, err := os.ReadFile("testdata/" + tc.module + ".wasm")
			if err != nil {
				t.Fatal(err)
			}
			info, err := scanModule(bin)
			if err != nil {
				t.Fatal(err)
			}
			if len(info.imports) != len(tc.imports) {
				t.Fatalf("imports %v, want %v", info.imports, tc.imports)
			}
			for i := range tc.imports {
				if info.imports[i] != tc.imports[i] {
					t.Fatalf("import %d: %v, want %v", i, info.imports[i], tc.imports[i])
				}
			}
			if info.memMin != tc.memMin || info.hasMem != tc.hasMem {
				t.Fatalf("memory %d %v, want %d %v", info.memMin, info.hasMem, tc.memMin, tc.hasMem)
			}
		})
	}
	for module, want := range map[string]bool{"murmur3": false, "hostile": false, "start": true, "start_loop": true} {
		bin, err := os.ReadFile("testdata/" + module + ".wasm")
		if err != nil {
			t.Fatal(err)
		}
		if info, err := scanModule(bin); err != nil || info.hasStart != want {
			t.Errorf("%s: hasStart %v, %v; want %v", module, info.hasStart, err, want)
		}
	}
	for _, bad := range [][]byte{nil, []byte("\x00asm"), []byte("\x00asm\x01\x00\x00\x00\x02\x05\x01"), []byte("ELF.....")} {
		if _, err := scanModule(bad); err == nil {
			t.Errorf("scanModule(%q): no error", bad)
		}
	}
}

// FuzzScanModule feeds arbitrary bytes to the import scanner, seeded with
// the test modules: it must return, not panic or loop.
func FuzzScanModule(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.wasm")
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, bin []byte) {
		info, err := scanModule(bin)
		if err == nil {
			for _, im := range info.imports[:max(len(info.imports)-1, 0)] {
				if im.kind != importFunc {
					t.Fatalf("scan went past a non-function import: %v", info.imports)
				}
			}
		}
	})
}
