package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testModule is a hand-written module of the plugins package's tests.
func testModule(name string) string {
	return filepath.Join("..", "..", "plugins", "testdata", name+".wasm")
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestPluginCheck(t *testing.T) {
	keys := writeTemp(t, "keys.txt", "user1:a\r\nuser2:b\nuser3:c\n\n"+strings.Repeat("k\n", 5))
	sameKeys := writeTemp(t, "same.txt", strings.Repeat("zz\n", 100))
	badKeys := writeTemp(t, "bad.txt", "zz\ntrap\nzz\n")
	value := writeTemp(t, "value.bin", "hello, plugin")
	for _, tc := range []struct {
		name string
		args []string
		ok   bool
		want []string // in the report
	}{
		{
			name: "batched partitioner",
			args: []string{"check", testModule("murmur3"), "--partitions", "16"},
			ok:   true,
			want: []string{
				"identity     wasm:sha256:", "exports      spangle_partition, spangle_partition_batch",
				"keys         10000 generated", "range        ok: every key in [0, 16)",
				"determinism  ok", "/call", "/key batched", "max/mean", "           0 ###", "          15 ###",
				"decoder\n  exports      none", "result: ok",
			},
		},
		{
			name: "keys file, flags first, grouped histogram",
			args: []string{"check", "--keys", keys, "--partitions", "100", "--max-skew", "0", testModule("sequins")},
			ok:   true,
			want: []string{"keys         9 from " + keys, "no batch export", "not checked", "0-3 ", "96-99 ", "result: ok"},
		},
		{
			name: "decoder",
			args: []string{"check", testModule("echo"), "--decode", value},
			ok:   true,
			want: []string{
				"partitioner\n  exports      none", "content type text/plain; charset=utf-8",
				"output       13 bytes: hello, plugin", "determinism  ok: the same output twice", "result: ok",
			},
		},
		{
			name: "unbalanced",
			args: []string{"check", testModule("murmur3"), "--keys", sameKeys},
			want: []string{"FAIL  unbalanced", "result: FAIL (1 problem(s))"},
		},
		{
			name: "fault",
			args: []string{"check", testModule("hostile"), "--keys", badKeys},
			want: []string{`FAIL  key "trap": plugins: plugin trapped`, "FAIL  1 of 3 keys failed"},
		},
		{
			name: "decoder wanted",
			args: []string{"check", testModule("murmur3"), "--decode", value},
			want: []string{"decoder\n  FAIL  plugins: missing or mistyped export", "does not export spangle_decode"},
		},
		{
			name: "missing export",
			args: []string{"check", testModule("no_alloc")},
			want: []string{"FAIL  plugins: missing or mistyped export", "result: FAIL (2 problem(s))"},
		},
		{
			name: "forbidden import",
			args: []string{"check", testModule("env_import")},
			want: []string{"FAIL  plugins: forbidden import"},
		},
		{
			name: "no file",
			args: []string{"check", "no-such.wasm"},
			want: []string{"FAIL  stat no-such.wasm"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := pluginCmd(append(tc.args, "--cache-dir", t.TempDir()), &out, io.Discard)
			if (err == nil) != tc.ok {
				t.Errorf("err = %v, want ok=%v\n%s", err, tc.ok, out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("report lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestPluginUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"inspect"}, {"check"}, {"check", "a.wasm", "b.wasm"}, {"check", "--partitions", "0", "a.wasm"}} {
		if err := pluginCmd(args, &bytes.Buffer{}, io.Discard); err == nil {
			t.Errorf("pluginCmd(%q): no error", args)
		}
	}
}
