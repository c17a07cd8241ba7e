package spangle

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// Unknown keys are reported with the line that sets each (the TOML
// decoder keeps key positions to itself, so the file is scanned for them)
// and, when a known key is close, "did you mean": a typo such as
// refresh_periode, or a key under the wrong table, says what to write.

// unknownKeysError lists the unknown keys of the file data, sorted, one a
// line.
func unknownKeysError(data string, keys []string) error {
	slices.Sort(keys)
	var b strings.Builder
	b.WriteString("unknown keys (spangle.toml's keys are in docs/CONFIGURATION.md):")
	for _, k := range keys {
		b.WriteString("\n  ")
		if line := keyLine(data, k); line > 0 {
			fmt.Fprintf(&b, "line %d: ", line)
		}
		b.WriteString(k)
		if s := suggestKey(k); s != "" {
			fmt.Fprintf(&b, " (did you mean %s?)", s)
		}
	}
	return fmt.Errorf("%s", b.String())
}

// keyLine returns the line (from 1) of data that sets key, dotted as
// toml.Key.String writes it, or that opens it as a table; 0 if not found.
// It follows [table] and [[array]] headers, dotted and quoted keys; a key
// inside an inline table is found at the line of the inline table.
func keyLine(data, key string) int {
	want := splitKey(key)
	var table []string
	for i, line := range strings.Split(data, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if line[0] == '[' {
			end := strings.LastIndexByte(line, ']')
			if end < 0 {
				continue
			}
			table = splitKey(strings.Trim(line[:end+1], "[]"))
			if slices.Equal(table, want) {
				return i + 1
			}
			continue
		}
		k, _, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		full := append(slices.Clone(table), splitKey(k)...)
		if len(full) <= len(want) && slices.Equal(full, want[:len(full)]) {
			return i + 1
		}
	}
	return 0
}

// splitKey splits a dotted TOML key, unquoting its parts.
func splitKey(k string) []string {
	var parts []string
	for p := range strings.SplitSeq(k, ".") {
		parts = append(parts, strings.Trim(strings.TrimSpace(p), `"'`))
	}
	return parts
}

// knownKeys are every key of fileConfig, dotted; a db's keys are written
// dbs.*.<key>.
var knownKeys = sync.OnceValue(func() []string {
	var keys []string
	var walk func(prefix string, t reflect.Type)
	walk = func(prefix string, t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Anonymous {
				walk(prefix, f.Type)
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if name == "" || name == "-" {
				continue
			}
			ft := f.Type
			for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
				ft = ft.Elem()
			}
			switch {
			case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
				walk(prefix+name+".*.", ft.Elem())
			case ft.Kind() == reflect.Struct && ft != reflect.TypeFor[duration]():
				walk(prefix+name+".", ft)
			default:
				keys = append(keys, prefix+name)
			}
		}
	}
	walk("", reflect.TypeFor[fileConfig]())
	return keys
})

// suggestKey returns the known key closest to the unknown key (a db's name
// standing for the *) within two edits, else a known key with the same
// last part under another table; "" if none.
func suggestKey(key string) string {
	parts := splitKey(key)
	last := parts[len(parts)-1]
	best, bestDist, moved := "", 3, ""
	for _, known := range knownKeys() {
		kp := strings.Split(known, ".")
		if len(kp) == len(parts) {
			for i, p := range kp {
				if p == "*" {
					kp[i] = parts[i]
				}
			}
		}
		name := strings.Join(kp, ".")
		if d := editDistance(key, name); d < bestDist {
			best, bestDist = name, d
		}
		if moved == "" && !strings.Contains(known, "*") && strings.HasSuffix("."+known, "."+last) {
			moved = known
		}
	}
	if best == "" {
		best = moved
	}
	if best != "" && !strings.Contains(best, ".") && len(parts) > 1 {
		return best + ", a top-level key (before any [table])"
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
