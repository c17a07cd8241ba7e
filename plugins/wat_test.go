package plugins

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The test modules are hand-written WAT, committed with their assembled
// bytes so that tests need no assembler. Regenerate them with wabt:
//
//go:generate sh testdata/assemble.sh

// TestWATAssembled checks that each testdata/*.wasm is what wat2wasm makes
// of its .wat source. It needs wat2wasm (Debian: apt-get install wabt).
func TestWATAssembled(t *testing.T) {
	sources, err := filepath.Glob("testdata/*.wat")
	if err != nil || len(sources) == 0 {
		t.Fatalf("no WAT sources: %v", err)
	}
	for _, src := range sources {
		if _, err := os.Stat(strings.TrimSuffix(src, ".wat") + ".wasm"); err != nil {
			t.Errorf("%s has no assembled module: %v", src, err)
		}
	}
	wat2wasm, err := exec.LookPath("wat2wasm")
	if err != nil {
		t.Skip("wat2wasm not on PATH (apt-get install wabt): committed .wasm files not checked against their sources")
	}
	for _, src := range sources {
		t.Run(filepath.Base(src), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.wasm")
			if b, err := exec.Command(wat2wasm, src, "-o", out).CombinedOutput(); err != nil {
				t.Fatalf("wat2wasm: %v\n%s", err, b)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(strings.TrimSuffix(src, ".wat") + ".wasm")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s differs from what wat2wasm makes of its source: run go generate ./plugins", src)
			}
		})
	}
}
