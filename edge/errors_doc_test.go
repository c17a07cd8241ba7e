package edge

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestErrorTableMatchesDoc checks that the package doc's table of Get's
// answers (doc.go, "# Lookups") states what errors.go's wireCodes does:
// every row of wireCodes whose error is node's or context's has a doc row
// with its status and its status for a peer, every error the doc names
// has that row, and the doc's rows for a client gone and any other error
// are errClientGone's and errOther's. The two were kept in step by hand.
func TestErrorTableMatchesDoc(t *testing.T) {
	doc := docErrorRows(t)
	names := wireCodeNames(t)
	if len(names) != len(wireCodes) {
		t.Fatalf("errors.go's wireCodes has %d rows in its source, %d at run time", len(names), len(wireCodes))
	}
	seen := map[string]bool{}
	for i, name := range names {
		if !strings.HasPrefix(name, "node.") && !strings.HasPrefix(name, "context.") {
			continue // batch and listing errors: the doc's batch table and the reasons they carry
		}
		seen[name] = true
		got, ok := doc[name]
		if !ok {
			t.Errorf("wireCodes maps %s to %d (peer %d): doc.go's table has no row for it", name, wireCodes[i].status, wireCodes[i].peer)
			continue
		}
		if want := [2]int{wireCodes[i].status, wireCodes[i].peer}; got != want {
			t.Errorf("%s: doc.go says %d (peer %d), wireCodes %d (peer %d)", name, got[0], got[1], want[0], want[1])
		}
	}
	for name := range doc {
		if strings.Contains(name, ".") && !seen[name] {
			t.Errorf("doc.go's table names %s, which wireCodes does not map", name)
		}
	}
	for name, row := range map[string]wireCode{"client went away": errClientGone, "any other error": errOther} {
		if got, want := doc[name], [2]int{row.status, row.peer}; got != want {
			t.Errorf("%s: doc.go says %v, errors.go %v", name, got, want)
		}
	}
}

// docRow is a row of doc.go's table of Get's answers: its first column,
// then two statuses.
var docRow = regexp.MustCompile(`^//\t(\S.*?)\s{2,}(\d{3})\s+(\d{3})\s`)

// docErrorRows returns doc.go's table of Get's answers: statuses by error
// name ("node.ErrBadListing, ErrBadCursor" gives both, with node's
// prefix) or by description up to a parenthesis ("client went away").
func docErrorRows(t *testing.T) map[string][2]int {
	t.Helper()
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][2]int{}
	in := false
	for line := range strings.SplitSeq(string(src), "\n") {
		switch {
		case strings.HasPrefix(line, "//\tGet's answer"):
			in = true
			continue
		case !in:
			continue
		case !strings.HasPrefix(line, "//\t"):
			in = false
			continue
		}
		m := docRow.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("doc.go: a row of the table of Get's answers without two statuses: %q", line)
		}
		status, _ := strconv.Atoi(m[2])
		peer, _ := strconv.Atoi(m[3])
		first := strings.TrimSpace(m[1])
		if i := strings.Index(first, " ("); i >= 0 {
			first = first[:i]
		}
		pkg := ""
		for name := range strings.SplitSeq(first, ", ") {
			if p, _, ok := strings.Cut(name, "."); ok && !strings.Contains(name, " ") {
				pkg = p + "."
			} else if pkg != "" {
				name = pkg + name
			}
			rows[name] = [2]int{status, peer}
		}
	}
	if len(rows) == 0 {
		t.Fatal("doc.go: no table of Get's answers")
	}
	return rows
}

// wireCodeNames returns the err of each row of wireCodes as written in
// errors.go ("node.ErrUnknownDB"), in order.
func wireCodeNames(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile("errors.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "errors.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "wireCodes" {
			return true
		}
		for _, elt := range vs.Values[0].(*ast.CompositeLit).Elts {
			for _, kv := range elt.(*ast.CompositeLit).Elts {
				if kv := kv.(*ast.KeyValueExpr); kv.Key.(*ast.Ident).Name == "err" {
					names = append(names, string(src[fset.Position(kv.Value.Pos()).Offset:fset.Position(kv.Value.End()).Offset]))
				}
			}
		}
		return false
	})
	return names
}
