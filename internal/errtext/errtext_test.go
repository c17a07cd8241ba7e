package errtext

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestStrip(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"node: bad cursor: truncated", "bad cursor: truncated"},
		{"node: invalid config: blocks: invalid build spec: x", "invalid config: invalid build spec: x"},
		{"batchwire: malformed batch: short header", "malformed batch: short header"},
		{"config x.toml: http.max_list_keys = 0", "config x.toml: http.max_list_keys = 0"},
		{"a\nnode: b (client: c); edge: d", "a\nb (c); d"},
		{"nodes: are not a package", "nodes: are not a package"},
		{"the node: stays inside a sentence", "the node: stays inside a sentence"},
		{"node: ", "node: "},
		{"", ""},
	} {
		if got := Strip(tc.in); got != tc.want {
			t.Errorf("Strip(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestPackagesListed: every package of the module whose errors start with
// its own name ("node: …") is in packages, so that a new one is not
// missed.
func TestPackagesListed(t *testing.T) {
	listed := map[string]bool{}
	for _, p := range packages {
		listed[p] = true
	}
	root := filepath.Join("..", "..")
	prefix := regexp.MustCompile(`(?:errors\.New|fmt\.Errorf)\("([a-z0-9]+): `)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly)
		if err != nil {
			return err
		}
		pkg := f.Name.Name
		if pkg == "main" {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range prefix.FindAllSubmatch(src, -1) {
			if string(m[1]) == pkg && !listed[pkg] {
				t.Errorf("%s: errors start with %q: add %q to packages in errtext.go, so that the CLI and the doors drop it", path, pkg+": ", pkg)
				listed[pkg] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
