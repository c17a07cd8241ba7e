package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestDeltaTimeline: a publish's timeline is read from the publisher's
// output and the nodes' JSON logs: the first line naming the version,
// the longest build, the last activation; another version's lines (one
// whose name the version's begins with among them) are not its.
func TestDeltaTimeline(t *testing.T) {
	dir := t.TempDir()
	start := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	logs := []string{
		`{"time":"2026-11-28T12:00:00.100Z","level":"INFO","msg":"building version","db":"bench","version":"1"}
{"time":"2026-11-28T12:00:00.450Z","level":"INFO","msg":"building version","db":"bench","version":"1-delta","files":1}
{"time":"2026-11-28T12:00:00.700Z","level":"INFO","msg":"blocks: built","db":"bench","version":"1-delta","seconds":0.25}
{"time":"2026-11-28T12:00:00.710Z","level":"INFO","msg":"version active","db":"bench","version":"1-delta"}
`,
		`not JSON
{"time":"2026-11-28T12:00:00.430Z","level":"INFO","msg":"building version","db":"bench","version":"1-delta","files":1}
{"time":"2026-11-28T12:00:00.730Z","level":"INFO","msg":"blocks: built","db":"bench","version":"1-delta","seconds":0.3}
{"time":"2026-11-28T12:00:00.740Z","level":"INFO","msg":"version active","db":"bench","version":"1-delta"}
{"time":"2026-11-28T12:00:09Z","level":"INFO","msg":"version active","db":"bench","version":"1-delta-x"}
`,
	}
	var nodes []*clusterNode
	for i, l := range logs {
		path := filepath.Join(dir, "node.log"+string(rune('1'+i)))
		if err := os.WriteFile(path, []byte(l), 0o644); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, &clusterNode{c: &child{logPath: path}})
	}
	out := []byte("delta of bench/1-delta over 1: 20000 records added or changed, 2000 deleted: 2700052 bytes, against 267567376 bytes full (1.01 %), computed in 352ms\n" +
		"published bench/1-delta to nats-object://b: 4 files, 4 uploaded, 0 skipped, 2700052 bytes uploaded in 14ms (187.2 MiB/s), 0 retries\n")
	run := deltaRun{Version: "1-delta"}
	run.timeline(out, nodes, start)
	want := deltaTimeline{Computed: 0.352, Uploaded: 0.014, Seen: 0.43, Build: 0.3, Active: 0.74}
	if d := run.Timeline; d != want {
		t.Errorf("timeline %+v, want %+v", d, want)
	}
}
