package blocks

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spangledb/spangle/blocks/seqfile"
)

var benchWords = strings.Fields(`alpha bravo charlie delta echo foxtrot golf hotel
india juliet kilo lima mike november oscar papa quebec romeo sierra tango
uniform victor whiskey xray yankee zulu user account session order item
price region country city street device mobile desktop tablet`)

// deltaBenchData writes, in dir, a base dataset of records records
// (benchFiles files, base/), the next one (next/: 0.5 % of the keys
// updated, 0.5 % new, 0.1 % deleted) and the delta between them (delta/:
// part-00000 and _DELETES).
func deltaBenchData(b *testing.B, dir string, records int) (base, next, delta []string) {
	b.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	// Text values, as cmd/spangle-bench's: words and numbers, 90 to
	// 110 bytes, compressible as a dataset's values are (random bytes
	// would make S2 store blocks as they are, at no cost).
	value := func(val []byte) []byte {
		val, n := val[:0], 90+r.IntN(21)
		for len(val) < n {
			if r.IntN(4) == 0 {
				val = strconv.AppendUint(val, uint64(r.IntN(1_000_000)), 10)
			} else {
				val = append(val, benchWords[r.IntN(len(benchWords))]...)
			}
			val = append(val, ' ')
		}
		return val[:n]
	}
	type out struct {
		f  *os.File
		bw *bufio.Writer
		w  *seqfile.Writer
	}
	open := func(path string) out {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			b.Fatal(err)
		}
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		bw := bufio.NewWriterSize(f, 1<<20)
		w, err := seqfile.NewWriter(bw, seqfile.WriterOptions{})
		if err != nil {
			b.Fatal(err)
		}
		return out{f, bw, w}
	}
	closeOut := func(o out) {
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
	var bases, nexts []out
	for f := range benchFiles {
		name := fmt.Sprintf("part-%05d", f)
		base, next = append(base, name), append(next, name)
		bases = append(bases, open(filepath.Join(dir, "base", name)))
		nexts = append(nexts, open(filepath.Join(dir, "next", name)))
	}
	ups := open(filepath.Join(dir, "delta", "part-00000"))
	df, err := os.Create(filepath.Join(dir, "delta", DeletesFileName))
	if err != nil {
		b.Fatal(err)
	}
	dels := NewDeletesWriter(df)
	key, val, nval := []byte(nil), make([]byte, 0, 128), make([]byte, 0, 128)
	for i := range records + records/200 {
		f := i % benchFiles
		key = benchKey(key, uint64(i))
		if i >= records { // new
			nval = value(nval)
			if err := nexts[f].w.Append(key, nval); err != nil {
				b.Fatal(err)
			}
			if err := ups.w.Append(key, nval); err != nil {
				b.Fatal(err)
			}
			continue
		}
		val = value(val)
		if err := bases[f].w.Append(key, val); err != nil {
			b.Fatal(err)
		}
		switch {
		case i%1000 == 999:
			if err := dels.Add(key); err != nil {
				b.Fatal(err)
			}
		case i%200 == 7:
			nval = value(nval)
			if err := nexts[f].w.Append(key, nval); err != nil {
				b.Fatal(err)
			}
			if err := ups.w.Append(key, nval); err != nil {
				b.Fatal(err)
			}
		default:
			if err := nexts[f].w.Append(key, val); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, o := range append(append(bases, nexts...), ups) {
		closeOut(o)
	}
	if err := dels.Close(); err != nil {
		b.Fatal(err)
	}
	if err := df.Close(); err != nil {
		b.Fatal(err)
	}
	return base, next, []string{"part-00000"}
}

// BenchmarkDelta builds the next version of a dataset in full and as a
// delta over the base, in turns, and reports their CPU times and the
// ratio (delta/full), paired in one run: issue 34's goal is ≤ 0.25; and
// the ratio of their partition files' sizes (s2-blocks: the blocks a
// delta packs again take S2's default encoding, a full build its better
// one).
func BenchmarkDelta(b *testing.B) {
	const records = 1_000_000
	dir := b.TempDir()
	baseNames, nextNames, deltaNames := deltaBenchData(b, dir, records)
	for _, comp := range []Compression{CompressionNone, CompressionZstd, CompressionS2Blocks} {
		b.Run(string(comp), func(b *testing.B) {
			s, err := OpenStore(b.TempDir(), Options{Logger: benchLogger()})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			spec := func(version, sub string, names []string) BuildSpec {
				return BuildSpec{DB: "db", Version: version, Files: sourceFiles(b, filepath.Join(dir, sub), names),
					Partitioner: sequinsPartitioner{}, PartitionerID: "sequins", Compression: comp}
			}
			base, err := s.Build(context.Background(), spec("base", "base", baseNames))
			if err != nil {
				b.Fatal(err)
			}
			defer base.Close()
			var (
				full, delta           time.Duration
				fullBytes, deltaBytes int64
			)
			i := 0
			for b.Loop() {
				i++
				for _, kind := range []string{"full", "delta"} {
					sp := spec(fmt.Sprint(kind, i), "next", nextNames)
					if kind == "delta" {
						sp = spec(fmt.Sprint(kind, i), "delta", deltaNames)
						sp.Base = base
						sp.Deletes = sourceFiles(b, filepath.Join(dir, "delta"), []string{DeletesFileName})
					}
					c0 := cpuTime()
					v, err := s.Build(context.Background(), sp)
					if err != nil {
						b.Fatal(err)
					}
					c := cpuTime() - c0
					if kind == "full" {
						full += c
						fullBytes += v.Manifest().StoredBytes
					} else {
						delta += c
						deltaBytes += v.Manifest().StoredBytes
					}
					v.Close()
					if err := s.Remove("db", sp.Version); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(full.Seconds()/float64(b.N), "full-cpu-s/op")
			b.ReportMetric(delta.Seconds()/float64(b.N), "delta-cpu-s/op")
			b.ReportMetric(delta.Seconds()/full.Seconds(), "delta/full-cpu")
			b.ReportMetric(float64(deltaBytes)/float64(fullBytes), "delta/full-bytes")
		})
	}
}
