package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spangledb/spangle/kvwatch/natstest"
)

// TestStartupErrors runs serve as a new operator's mistakes would (issue
// 29 item 3): each start fails before anything starts (no "spangle
// serving" line), at once, exits non-zero, and says what to change: the
// config key and the flag, every problem of a second instance in one run
// (it met the port, then the data dir's lock, then the NATS port, one run
// at a time), unknown keys with their line and the key meant, a missing
// source, a duration below its floor.
func TestStartupErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := buildBinary(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	natsAddr := fmt.Sprintf("127.0.0.1:%d", natstest.FreePort(t))
	first := startServe(t, bin, true, "--data-dir", dataDir, "--nats-listen", natsAddr)
	first.logOnFailure(t)
	bind := strings.TrimPrefix(first.http, "http://")
	examples := exampleData(t)
	dir := t.TempDir()
	config := func(body string) string {
		p := filepath.Join(dir, fmt.Sprintf("c%d.toml", len(body)))
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fresh := func() string { return filepath.Join(t.TempDir(), "data") }
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"second instance", []string{"--source", examples, "--data-dir", dataDir, "--bind", bind, "--nats-listen", natsAddr},
			[]string{"data_dir", "--data-dir", "is in use", "bind (--bind) \"" + bind + "\"", "address already in use",
				"[nats] listen (--nats-listen) \"" + natsAddr + "\""}},
		{"unknown keys", []string{"--config", config("source = \"x\"\nrefresh_periode = \"1m\"\n[nats]\nlisten = \"127.0.0.1:0\"\nentry_tl = \"10s\"\n[dbs.d]\npartitionr = \"sequins\"\n")},
			[]string{"line 2: refresh_periode (did you mean refresh_period?)",
				"line 5: nats.entry_tl (did you mean nats.entry_ttl?)", "line 7: dbs.d.partitionr (did you mean dbs.d.partitioner?)"}},
		{"key under the wrong table", []string{"--config", config("[nats]\nrefresh_period = \"1m\"\n")},
			[]string{"line 2: nats.refresh_period (did you mean refresh_period, a top-level key (before any [table])?)"}},
		{"duration below its floor", []string{"--config", config("refresh_period = \"1ns\"\n"), "--source", examples, "--data-dir", fresh()},
			[]string{`refresh_period = "1ns" is out of range: want 1s to 168h0m0s, or 0 to list the source only at start and on SIGHUP`}},
		{"sequins block_size", []string{"--config", config("[storage]\nblock_size = 4096\n")},
			[]string{"storage.block_size: no meaning: the default layout (s2-blocks) compresses records in blocks of a fixed 4 KiB"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			out, err := exec.CommandContext(ctx, bin, append([]string{"serve"}, tc.args...)...).CombinedOutput()
			if err == nil || ctx.Err() != nil {
				t.Fatalf("serve %q: %v (want a quick failure):\n%s", tc.args, err, out)
			}
			s := string(out)
			for _, want := range tc.want {
				if !strings.Contains(s, want) {
					t.Errorf("the error lacks %q:\n%s", want, s)
				}
			}
			if strings.Contains(s, "spangle serving") || strings.Count(s, "spangle: ") != 1 {
				t.Errorf("want one error before anything starts:\n%s", s)
			}
		})
	}
	first.stop(t)
}
