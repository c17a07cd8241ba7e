package client

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLightDeps checks that the client builds without the Wasm runtime and
// without Prometheus: an application embedding it gets the partitioners
// from plugins/partition, and pays for wazero only when it loads a Wasm
// partitioner with plugins.OpenPartitioner (it failed when the client
// imported plugins for the Partitioner interface: 33 wazero packages).
func TestLightDeps(t *testing.T) {
	goTool, err := exec.LookPath("go") // go test puts GOROOT/bin first on PATH
	if err != nil {
		t.Fatalf("go tool: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	var heavy []string
	for pkg := range strings.FieldsSeq(string(out)) {
		for _, banned := range []string{
			"github.com/tetratelabs/wazero",
			"github.com/prometheus/",
			"github.com/spangledb/spangle/plugins",
		} {
			if strings.HasPrefix(pkg, banned) && pkg != "github.com/spangledb/spangle/plugins/partition" {
				heavy = append(heavy, pkg)
			}
		}
	}
	if len(heavy) > 0 {
		t.Fatalf("edge/client depends on %d heavy packages: %s", len(heavy), strings.Join(heavy, " "))
	}
}
