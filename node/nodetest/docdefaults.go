package nodetest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// CheckDocDefaults checks that every "Default X" in the doc comments of
// the struct fields in files states what defaults (struct name → the
// value its DefaultConfig returns) holds: the package's one place for
// defaults and its documentation cannot drift apart. It returns how many
// fields it checked.
func CheckDocDefaults(t *testing.T, files []string, defaults map[string]any) int {
	t.Helper()
	fset := token.NewFileSet()
	docRE := regexp.MustCompile(`Defaults? ("[^"]*"|.+?)(?:[.:;]\s|[.:;]?$| \(|,)`)
	checked := 0
	for _, file := range files {
		f, err := parser.ParseFile(fset, file, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			dv, ok := defaults[ts.Name.Name]
			def := reflect.ValueOf(dv)
			st, isStruct := ts.Type.(*ast.StructType)
			if !ok || !isStruct {
				return false
			}
			for i, field := range st.Fields.List {
				if field.Doc == nil || len(field.Names) == 0 {
					continue
				}
				doc := strings.Join(strings.Fields(field.Doc.Text()), " ")
				m := docRE.FindStringSubmatch(doc)
				if m == nil {
					continue
				}
				stated := strings.TrimSpace(m[1])
				names := []string{field.Names[0].Name}
				values := []string{stated}
				// "Defaults 1s and 30s." covers this field and the next.
				if a, b, ok := strings.Cut(stated, " and "); ok && strings.HasPrefix(m[0], "Defaults") && i+1 < len(st.Fields.List) {
					names = append(names, st.Fields.List[i+1].Names[0].Name)
					values = []string{a, b}
				}
				for j, name := range names {
					got := def.FieldByName(name)
					if !got.IsValid() {
						t.Errorf("%s.%s: no such field", ts.Name.Name, name)
						continue
					}
					if !docStates(values[j], got.Interface()) {
						t.Errorf("%s.%s: the doc says Default %q, DefaultConfig sets %v", ts.Name.Name, name, values[j], got.Interface())
					}
					checked++
				}
			}
			return false
		})
	}
	return checked
}

// docStates reports whether a doc's stated default describes v.
func docStates(stated string, v any) bool {
	word, _, _ := strings.Cut(stated, " ")
	switch v := v.(type) {
	case time.Duration:
		if v == 0 {
			return word == "0" || word == "0s"
		}
		d, err := time.ParseDuration(word)
		return err == nil && d == v
	case bool:
		return word == strconv.FormatBool(v)
	case int:
		// "GOMAXPROCS": the default is the machine's, read by DefaultConfig.
		return word == strconv.Itoa(v) || (v == 0 && (word == "0" || word == "none")) ||
			(strings.Trim(word, ".,") == "GOMAXPROCS" && v == runtime.GOMAXPROCS(0))
	case uint32:
		return word == strconv.FormatUint(uint64(v), 10)
	case int64:
		if n, unit, ok := strings.Cut(stated, " "); ok && strings.HasPrefix(unit, "MiB") {
			x, err := strconv.ParseInt(n, 10, 64)
			return err == nil && x<<20 == v
		}
		return word == strconv.FormatInt(v, 10) || (v == 0 && word == "0")
	case string:
		if v == "" {
			return strings.HasPrefix(stated, `""`) || word == "none" || word == "off"
		}
		return strings.Trim(word, `"(),`) == v || strings.Contains(stated, `"`+v+`"`) || strings.Contains(stated, v+" ")
	}
	// Pointers, interfaces, maps and nested configs: nil or zero.
	return word == "nil" || word == "none" || strings.HasPrefix(stated, "(nil)") || reflect.ValueOf(v).IsZero()
}
