//go:build unix

package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/spangledb/spangle/blocks/seqfile"
)

// deltaBenchDirs writes the bench's delta scenario (cmd/spangle-bench
// delta) at a smaller scale: records records of 16-byte keys and
// 100-byte values in 16 SequenceFiles (base), and the next version
// (next): 0.5 % of the keys updated, 0.5 % new, 0.1 % deleted.
func deltaBenchDirs(b *testing.B, root string, records int) (base, next string) {
	b.Helper()
	base, next = filepath.Join(root, "d", "v1"), filepath.Join(root, "d", "v2")
	const files = 16
	type out struct {
		f  *os.File
		bw *bufio.Writer
		w  *seqfile.Writer
	}
	var outs [2][files]out
	for d, dir := range []string{base, next} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for n := range files {
			f, err := os.Create(filepath.Join(dir, fmt.Sprintf("part-%05d", n)))
			if err != nil {
				b.Fatal(err)
			}
			bw := bufio.NewWriterSize(f, 1<<20)
			w, err := seqfile.NewWriter(bw, seqfile.WriterOptions{})
			if err != nil {
				b.Fatal(err)
			}
			outs[d][n] = out{f, bw, w}
		}
	}
	value := func(v []byte, seed uint64, i int) []byte {
		r := rand.New(rand.NewPCG(seed, uint64(i)))
		v = v[:0]
		for len(v) < 100 {
			v = fmt.Appendf(v, "%d ", r.IntN(1_000_000))
		}
		return v[:100]
	}
	var k, v []byte
	for i := range records + records/200 {
		k = fmt.Appendf(k[:0], "%016x", i)
		f := i % files
		if i < records {
			v = value(v, 1, i)
			if err := outs[0][f].w.Append(k, v); err != nil {
				b.Fatal(err)
			}
			if i%1000 == 999 {
				continue // deleted
			}
			if i%200 == 7 {
				v = value(v, 2, i) // updated
			}
		} else {
			v = value(v, 2, i) // new
		}
		if err := outs[1][f].w.Append(k, v); err != nil {
			b.Fatal(err)
		}
	}
	for d := range outs {
		for _, o := range outs[d] {
			if err := o.w.Close(); err != nil {
				b.Fatal(err)
			}
			if err := o.bw.Flush(); err != nil {
				b.Fatal(err)
			}
			if err := o.f.Close(); err != nil {
				b.Fatal(err)
			}
		}
	}
	return base, next
}

// BenchmarkFastDelta is publish --base --cache's work before the upload
// (fastDelta: DIR read, the walk against the base's index, the upserts
// written, the new index kept) on the bench's delta scenario at
// 2,000,000 records; cpu-s/op is the process's CPU.
func BenchmarkFastDelta(b *testing.B) {
	ctx := context.Background()
	root, cache := b.TempDir(), b.TempDir()
	baseDir, nextDir := deltaBenchDirs(b, root, 2_000_000)
	ls, err := openLocalStore(ctx, testDatasetFlags(), cache)
	if err != nil {
		b.Fatal(err)
	}
	defer ls.close()
	_, x, _, _, err := ls.scanDir(ctx, "d", "v1", baseDir)
	if err != nil {
		b.Fatal(err)
	}
	if err := ls.keepIndex("d", x); err != nil {
		b.Fatal(err)
	}
	idx := deltaIndexPath(cache, "d")
	baseIdx, err := os.ReadFile(idx)
	if err != nil {
		b.Fatal(err)
	}
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		if err := os.WriteFile(idx, baseIdx, 0o644); err != nil {
			b.Fatal(err)
		}
		out := filepath.Join(b.TempDir(), "out")
		b.StartTimer()
		c0 := benchCPU()
		rep, _, _, err := ls.fastDelta(ctx, out, "d", "v2", "v1", nextDir)
		cpu += benchCPU() - c0
		if err != nil {
			b.Fatal(err)
		}
		if rep.Upserts != 20_000 || rep.Deletes != 2_000 {
			b.Fatalf("%+v", rep)
		}
	}
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
}

// benchCPU returns the process's user and system CPU time so far.
func benchCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkIndexSort is finishAll on the index of 2,000,000 records read
// by 16 builders (the delta scenario's files), their hashes random.
func BenchmarkIndexSort(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	ibs := make([]*indexBuilder, 16)
	for f := range ibs {
		ibs[f] = &indexBuilder{}
		for range 2_000_000 / len(ibs) {
			ibs[f].hashes = append(ibs[f].hashes, recordHashes{r.Uint64(), r.Uint64()})
		}
	}
	for b.Loop() {
		if _, ok := finishAll(deltaIndexHeader{}, ibs); !ok {
			b.Fatal("a shared hash")
		}
	}
}
