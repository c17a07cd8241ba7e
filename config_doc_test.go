package spangle_test

import (
	"github.com/spangledb/spangle"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestReadmeConfigDefaults: every line of the config block of
// docs/CONFIGURATION.md (where the README sends users) whose
// comment does not start with "e.g." states a default. Loading that line
// alone must leave spangle.DefaultConfig() unchanged; a line stating another value
// than the code's default fails, naming the key.
func TestReadmeConfigDefaults(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("docs", "CONFIGURATION.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i := strings.Index(readme, "## Configuration")
	j := strings.Index(readme[i:], "```toml\n")
	if i < 0 || j < 0 {
		t.Fatal("docs/CONFIGURATION.md has no config block")
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

// TestDocsForNewOperators: the quick start works on Linux and returns
// (issue 29 item 6: it used macOS's open, and put make test in the block
// of make run, which does not return), MIGRATING.md and the start-up
// error describe block_size as the default layout is (s2-blocks
// compresses 4 KiB blocks, not values one by one), and docs/OPERATIONS.md
// lists the start-up errors, linked from the README.
func TestDocsForNewOperators(t *testing.T) {
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	readme := read("README.md")
	i := strings.Index(readme, "## Quick start")
	j := strings.Index(readme[i+1:], "\n## ") + 1
	if i < 0 || j < 0 {
		t.Fatal("README has no quick start")
	}
	quick := readme[i : i+j]
	parts := strings.Split(quick, "```")
	for k := 1; k < len(parts); k += 2 { // the code blocks
		block := parts[k]
		for _, line := range strings.Split(block, "\n") {
			if strings.HasPrefix(line, "open ") {
				t.Errorf("the quick start uses macOS's open: %q", line)
			}
		}
		if strings.Contains(block, "make run") && strings.Contains(block, "make test") {
			t.Errorf("make test is in the block of make run, which does not return:\n%s", block)
		}
	}
	if !strings.Contains(quick, "xdg-open http://127.0.0.1:9599/") {
		t.Errorf("the quick start does not open the dashboard with xdg-open")
	}
	migrating := read(filepath.Join("docs", "MIGRATING.md"))
	for _, line := range strings.Split(migrating, "\n") {
		if strings.Contains(line, "`[storage] block_size`") && !strings.Contains(line, "4 KiB") {
			t.Errorf("MIGRATING.md on block_size: %s", line)
		}
	}
	p := filepath.Join(t.TempDir(), "sequins.toml")
	if err := os.WriteFile(p, []byte("[storage]\nblock_size = 4096\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := spangle.DefaultConfig()
	if err := spangle.LoadConfig(p, &cfg); err == nil || !strings.Contains(err.Error(), "blocks of a fixed 4 KiB") {
		t.Errorf("the block_size error: %v", err)
	}
	if ops := read(filepath.Join("docs", "OPERATIONS.md")); !strings.Contains(ops, "## Troubleshooting") || !strings.Contains(ops, "(--nats-listen)") {
		t.Errorf("docs/OPERATIONS.md has no Troubleshooting section listing the start-up errors")
	}
	if !strings.Contains(readme, "docs/OPERATIONS.md#troubleshooting") {
		t.Errorf("the README does not link the Troubleshooting section")
	}
}
