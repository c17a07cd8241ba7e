package spangle_test

import (
	"github.com/spangledb/spangle"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestReadmeConfigDefaults: every line of the README's config block whose
// comment does not start with "e.g." states a default. Loading that line
// alone must leave spangle.DefaultConfig() unchanged; a line stating another value
// than the code's default fails, naming the key.
func TestReadmeConfigDefaults(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i := strings.Index(readme, "## Configuration")
	j := strings.Index(readme[i:], "```toml\n")
	if i < 0 || j < 0 {
		t.Fatal("README has no config block")
	}
	block := readme[i+j+len("```toml\n"):]
	block = block[:strings.Index(block, "```")]

	table, tableExample, checked := "", false, 0
	for _, line := range strings.Split(block, "\n") {
		code, comment, _ := strings.Cut(line, "#")
		code, comment = strings.TrimSpace(code), strings.TrimSpace(comment)
		example := strings.HasPrefix(comment, "e.g.")
		switch {
		case code == "":
			continue
		case strings.HasPrefix(code, "["):
			table, tableExample = strings.Trim(code, "[]"), example
			continue
		case example || tableExample:
			continue
		}
		body := code + "\n"
		if table != "" {
			body = "[" + table + "]\n" + body
		}
		p := filepath.Join(t.TempDir(), "one.toml")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		got, want := spangle.DefaultConfig(), spangle.DefaultConfig()
		if err := spangle.LoadConfig(p, &got); err != nil {
			t.Errorf("README line %q: %v", code, err)
			continue
		}
		got.Node.DBs, want.Node.DBs = nil, nil // loadConfig always makes the map
		if !reflect.DeepEqual(got, want) {
			t.Errorf("README states %q under [%s], but that is not the default", code, table)
		}
		checked++
	}
	if checked < 50 {
		t.Fatalf("only %d README lines checked", checked)
	}
}
