package spangle

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestConfigBounds: every duration and size key of the config file has a
// bound (found by walking fileConfig's types); the defaults are within
// them; and for every key a value below its floor or above its ceiling,
// written in a file, is refused naming the key, while the floor and the
// ceiling themselves are accepted.
func TestConfigBounds(t *testing.T) {
	var keys []string
	var walk func(prefix string, typ reflect.Type)
	walk = func(prefix string, typ reflect.Type) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			if f.Anonymous {
				walk(prefix, f.Type)
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			switch {
			case f.Type == reflect.TypeFor[duration](), f.Type == reflect.TypeFor[size]():
				keys = append(keys, prefix+name)
			case f.Type.Kind() == reflect.Struct:
				walk(prefix+name+".", f.Type)
			}
		}
	}
	walk("", reflect.TypeFor[fileConfig]())
	var bounded []string
	for _, b := range bounds {
		bounded = append(bounded, b.key)
	}
	slices.Sort(keys)
	slices.Sort(bounded)
	if !slices.Equal(keys, bounded) {
		t.Fatalf("the file's duration and size keys:\n%q\nthe bounded keys:\n%q", keys, bounded)
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("the defaults are out of bounds: %v", err)
	}

	type tc struct {
		name, key, value string
		ok               bool
	}
	cases := []tc{
		{"refresh 1ns", "refresh_period", "1ns", false}, // issue 25: 131 % CPU on an idle node
		{"refresh off", "refresh_period", "0s", true},
		{"retry only on SIGHUP", "retry_failed_after", "-1s", true},
		{"bandwidth unlimited", "max_download_bandwidth", "0", true},
		{"size overflows", "storage.memory_budget", "9000000000TiB", false},
	}
	for _, b := range bounds {
		for _, c := range []struct {
			name string
			v    int64
			ok   bool
		}{{"floor", b.min, true}, {"ceiling", b.max, true}, {"below floor", b.min - 1, false}, {"above ceiling", b.max + 1, false}} {
			if c.v == 0 && b.zero != "" || c.v < 0 && b.negative != "" {
				continue
			}
			cases = append(cases, tc{c.name, b.key, b.format(c.v), c.ok})
		}
	}
	dir := t.TempDir()
	for _, c := range cases {
		t.Run(c.key+"/"+c.name, func(t *testing.T) {
			table, key := "", c.key
			if i := strings.LastIndexByte(c.key, '.'); i >= 0 {
				table, key = "["+c.key[:i]+"]\n", c.key[i+1:]
			}
			p := filepath.Join(dir, "bounds.toml")
			if err := os.WriteFile(p, []byte(table+key+" = \""+c.value+"\"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg := DefaultConfig()
			err := LoadConfig(p, &cfg)
			if err == nil {
				err = cfg.Validate()
			}
			switch {
			case c.ok && err != nil:
				t.Errorf("%s = %q refused: %v", c.key, c.value, err)
			case !c.ok && err == nil:
				t.Errorf("%s = %q accepted", c.key, c.value)
			case !c.ok && !strings.Contains(err.Error(), c.key):
				t.Errorf("%s = %q: the error does not name the key: %v", c.key, c.value, err)
			}
		})
	}
}

// TestFormatBytes: formatBytes writes what ParseBytes reads back.
func TestFormatBytes(t *testing.T) {
	for _, v := range []int64{0, 1, 1023, 1 << 10, 3 << 10, 1536 << 10, 64 << 20, 1 << 40, 1<<40 + 1} {
		got, err := ParseBytes(formatBytes(v))
		if err != nil || got != v {
			t.Errorf("formatBytes(%d) = %q, read back as %d, %v", v, formatBytes(v), got, err)
		}
	}
}

// TestParseBytes: sizes are whole numbers with an optional unit; a
// fraction, trailing text or an overflow is refused, never truncated.
func TestParseBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"512", 512, true},
		{" 64 MiB ", 64 << 20, true},
		{"2GB", 2e9, true},
		{"1TiB", 1 << 40, true},
		{"1.5MiB", 0, false},
		{"10 MiB extra", 0, false},
		{"10x", 0, false},
		{"-1", 0, false},
		{"", 0, false},
		{"9999999TiB", 0, false},
	} {
		got, err := ParseBytes(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
