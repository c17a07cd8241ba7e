//go:build unix

package node

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spangledb/spangle/blocks"
	"github.com/spangledb/spangle/blocks/seqfile"
)

// writeDiffBenchVersion writes version of db "d" under root, streaming:
// records keys "u%08d" with ~100-byte values over 16 SequenceFiles. With
// next set it is the next version: 0.5 % of the keys updated,
// 0.1 % deleted, 0.5 % new keys ("w%08d").
func writeDiffBenchVersion(b *testing.B, root, version string, records int, next bool) {
	b.Helper()
	dir := filepath.Join(root, "d", version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	const files = 16
	for f := range files {
		fh, err := os.Create(filepath.Join(dir, fmt.Sprintf("part-%05d", f)))
		if err != nil {
			b.Fatal(err)
		}
		bw := bufio.NewWriterSize(fh, 1<<20)
		w, err := seqfile.NewWriter(bw, seqfile.WriterOptions{})
		if err != nil {
			b.Fatal(err)
		}
		var key, val []byte
		for i := f; i < records; i += files {
			if next && i%1000 == 1 {
				continue // deleted
			}
			gen := 1
			if next && i%200 == 0 {
				gen = 2 // updated
			}
			key = fmt.Appendf(key[:0], "u%08d", i)
			val = fmt.Appendf(val[:0], `{"id":%d,"gen":%d,"name":"user-%d","pad":"0123456789012345678901234567890123456789012345678901234"}`, i, gen, i)
			if err := w.Append(key, val); err != nil {
				b.Fatal(err)
			}
			if next && i%200 == 7 {
				key = fmt.Appendf(key[:0], "w%08d", i) // new
				if err := w.Append(key, val); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		if err := bw.Flush(); err != nil {
			b.Fatal(err)
		}
		if err := fh.Close(); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "_SUCCESS"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkGuardDiff measures, in one run, the merge diff max_change and
// the key by key purges make (guards_diff.go) of two versions of 2M
// records (the next one 0.5 % updated, 0.5 % new, 0.1 % deleted) against
// one read of both versions (every record's key and value: the least a
// diff reads) and against the build of the next version on the same
// node: diff/read and diff/build are the figures.
//
//	go test -run '^$' -bench 'BenchmarkGuardDiff' -benchtime 3x ./node
func BenchmarkGuardDiff(b *testing.B) {
	const records = 2_000_000
	root := b.TempDir()
	writeDiffBenchVersion(b, root, "v1", records, false)
	n := newTestNode(b, root, func(c *Config) {
		c.DBs = map[string]DBConfig{"d": {Activation: ActivationManual}}
		c.MemoryBudget = 1 << 30
	})
	if err := n.Pin("d", Pin{Version: "v1"}); err != nil {
		b.Fatal(err)
	}
	nodeWait(b, "v1 active", 10*time.Minute, func() bool { return n.activeVersion("d") == "v1" })
	writeDiffBenchVersion(b, root, "v2", records, true)
	n.Refresh()
	d := (*n.dbs.Load())["d"]
	nodeWait(b, "v2 built", 10*time.Minute, func() bool { p := d.pending.Load(); return p != nil && p.name == "v2" })
	old, next := d.active.Load().data, d.pending.Load().data
	build := next.Manifest().BuildSeconds

	var diff, read time.Duration
	var x *versionDiff
	for b.Loop() {
		start := time.Now()
		var err error
		if x, err = diffVersions("v1", old, next, 100_000); err != nil {
			b.Fatal(err)
		}
		diff += time.Since(start)
		start = time.Now()
		for _, v := range []*blocks.Version{old, next} {
			if err := readAll(v); err != nil {
				b.Fatal(err)
			}
		}
		read += time.Since(start)
	}
	if x.added != records/200 || x.removed != records/1000 || x.changed != records/200 {
		b.Fatalf("diff: %d added, %d removed, %d changed", x.added, x.removed, x.changed)
	}
	runs := float64(b.N)
	b.ReportMetric(diff.Seconds()/runs, "diff-s")
	b.ReportMetric(read.Seconds()/runs, "read-both-s")
	b.ReportMetric(build, "build-s")
	b.ReportMetric(diff.Seconds()/read.Seconds(), "diff/read")
	b.ReportMetric(diff.Seconds()/runs/build, "diff/build")
	b.ReportMetric(0, "ns/op")
}

// readAll reads every record of v, key and value.
func readAll(v *blocks.Version) error {
	m := v.Manifest()
	return v.View(func(r *blocks.Reader) error {
		for _, p := range m.Partitions {
			if err := r.Each(p, blocks.Range{}, func([]byte, []byte) error { return nil }); err != nil {
				return err
			}
		}
		return nil
	})
}

// nodeWait polls cond until it holds, or fails b after within.
func nodeWait(b *testing.B, what string, within time.Duration, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}
}
