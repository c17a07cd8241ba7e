package blocks

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"

	"github.com/spangledb/spangle/blocks/seqfile"
)

const benchFiles = 16

// benchLogger logs builds with -v.
func benchLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return nil
}

// benchKey is the i-th key of a bench dataset: 16 bytes, random-looking.
func benchKey(dst []byte, i uint64) []byte {
	dst = binary.BigEndian.AppendUint64(dst[:0], i*0x9E3779B97F4A7C15)
	return binary.BigEndian.AppendUint64(dst, i^0xD6E8FEB86659FD93)
}

// writeBenchDataset writes records records over benchFiles uncompressed
// SequenceFiles in dir, 16-byte keys and ~100-byte values (random, or
// JSON-like when repetitive), streaming: it keeps nothing in memory.
func writeBenchDataset(tb testing.TB, dir string, records int, repetitive bool) []string {
	tb.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	var names []string
	key, val := []byte(nil), make([]byte, 0, 128)
	for f := range benchFiles {
		name := fmt.Sprintf("part-%05d", f)
		names = append(names, name)
		fh, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			tb.Fatal(err)
		}
		bw := bufio.NewWriterSize(fh, 1<<20)
		w, err := seqfile.NewWriter(bw, seqfile.WriterOptions{})
		if err != nil {
			tb.Fatal(err)
		}
		for i := f; i < records; i += benchFiles {
			key = benchKey(key, uint64(i))
			if repetitive {
				id := r.IntN(1e8)
				val = fmt.Appendf(val[:0], `{"id":%d,"name":"user-%d","city":"%s","color":"%s","score":%d}`,
					id, id, []string{"berlin", "paris", "tokyo", "lima"}[r.IntN(4)],
					[]string{"red", "green", "blue"}[r.IntN(3)], r.IntN(1000))
			} else {
				val = val[:112]
				for j := 0; j < len(val); j += 8 {
					binary.LittleEndian.PutUint64(val[j:], r.Uint64())
				}
				val = val[:90+r.IntN(21)]
			}
			if err := w.Append(key, val); err != nil {
				tb.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			tb.Fatal(err)
		}
		if err := bw.Flush(); err != nil {
			tb.Fatal(err)
		}
		if err := fh.Close(); err != nil {
			tb.Fatal(err)
		}
	}
	return names
}

func BenchmarkBuild(b *testing.B) {
	root := b.TempDir()
	datasets := map[string][]string{}
	for _, bc := range []struct {
		records int
		comp    Compression
		tx      bool
		fast    bool // s2-blocks with S2's default encoding, not its better one
	}{
		{100_000, CompressionNone, false, false},
		{100_000, CompressionNone, true, false},
		{100_000, CompressionS2, false, false},
		{100_000, CompressionZstd, false, false},
		{1_000_000, CompressionNone, false, false},
		{1_000_000, CompressionS2Blocks, false, false},
		{1_000_000, CompressionS2Blocks, false, true},
		{1_000_000, CompressionS2, false, false},
		{1_000_000, CompressionZstd, false, false},
		{2_000_000, CompressionNone, false, false},
	} {
		name := fmt.Sprintf("records=%d/%s", bc.records, bc.comp)
		if bc.tx {
			name += "/tx"
		}
		if bc.fast {
			name += "/fast-encoding"
		}
		b.Run(name, func(b *testing.B) {
			if bc.fast {
				useFastEncoding(b)
			}
			repetitive := bc.comp != CompressionNone
			id := fmt.Sprintf("%d-%v", bc.records, repetitive)
			dir := filepath.Join(root, id)
			if datasets[id] == nil {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					b.Fatal(err)
				}
				datasets[id] = writeBenchDataset(b, dir, bc.records, repetitive)
			}
			files := sourceFiles(b, dir, datasets[id])
			s, err := OpenStore(b.TempDir(), Options{TxWrites: bc.tx, Logger: benchLogger()})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			b.ResetTimer()
			cpu, last := loopVersions(b, s, func(version string) (*Version, error) {
				return s.Build(context.Background(), BuildSpec{DB: "db", Version: version,
					Files: files, Partitioner: sequinsPartitioner{}, Compression: bc.comp})
			})
			b.ReportMetric(float64(bc.records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(last.StoredBytes)/float64(bc.records), "stored-B/record")
			// The machine may be shared: CPU time is the steadier figure.
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}

// useFastEncoding makes blockPacker use S2's default encoding instead of
// its better one until b ends.
func useFastEncoding(b *testing.B) {
	blockEncode = s2.Encode
	b.Cleanup(func() { blockEncode = s2.EncodeBetter })
}

// loopVersions runs b.Loop, each round making version v<round> of db in s
// with newVersion, timed, then closing and removing it, untimed. It returns the
// process CPU time the makes took (cpuTime) and the last one's manifest.
func loopVersions(b *testing.B, s *Store, newVersion func(version string) (*Version, error)) (time.Duration, *Manifest) {
	b.Helper()
	var cpu time.Duration
	var last *Manifest
	i := 0
	for b.Loop() {
		i++
		version := fmt.Sprint("v", i)
		c0 := cpuTime()
		v, err := newVersion(version)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cpu += cpuTime() - c0
		last = v.Manifest()
		v.Close()
		if err := s.Remove("db", version); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	return cpu, last
}

// buildBenchVersion builds the files names of dir (writeBenchDataset)
// as version v1 of db with comp, in a store of its own; both are closed
// when b ends.
func buildBenchVersion(b *testing.B, dir string, names []string, comp Compression) *Version {
	b.Helper()
	s, err := OpenStore(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	v, err := s.Build(context.Background(), BuildSpec{DB: "db", Version: "v1",
		Files: sourceFiles(b, dir, names), Partitioner: sequinsPartitioner{}, Compression: comp})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { v.Close() })
	return v
}

// reportCPU reports the process's CPU time per op since cpu0
// (cpuTime): on a machine other processes share, steadier than ns/op.
func reportCPU(b *testing.B, cpu0 time.Duration) {
	if cpu0 > 0 && b.N > 0 {
		b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkGet measures Gets of uniformly random keys of 1M records in
// each compression, one goroutine (serial) and GOMAXPROCS (parallel);
// cpu-ns/op is the process's CPU time per Get.
func BenchmarkGet(b *testing.B) {
	const records = 1_000_000
	dir := b.TempDir()
	names := writeBenchDataset(b, dir, records, true)
	for _, comp := range []Compression{CompressionNone, CompressionZstd, CompressionS2, CompressionS2Blocks} {
		b.Run(string(comp), func(b *testing.B) {
			v := buildBenchVersion(b, dir, names, comp)
			stored := v.Manifest().StoredBytes
			get := func(r *rand.Rand, key, buf []byte) ([]byte, []byte) {
				key = benchKey(key, r.Uint64N(records))
				p, _, _ := (sequinsPartitioner{}).Partition(key, benchFiles)
				buf, err := v.GetAppend(buf[:0], p, key)
				if err != nil {
					b.Fatal(err)
				}
				return key, buf
			}
			b.Run("serial", func(b *testing.B) {
				r := rand.New(rand.NewPCG(3, 4))
				var key, buf []byte
				cpu0 := cpuTime()
				for b.Loop() {
					key, buf = get(r, key, buf)
				}
				reportCPU(b, cpu0)
				b.ReportMetric(float64(stored)/records, "stored-B/record")
			})
			b.Run("parallel", func(b *testing.B) {
				var seed atomic.Uint64
				cpu0 := cpuTime()
				b.RunParallel(func(pb *testing.PB) {
					r := rand.New(rand.NewPCG(seed.Add(1), 5))
					var key, buf []byte
					for pb.Next() {
						key, buf = get(r, key, buf)
					}
				})
				reportCPU(b, cpu0)
			})
			b.Run("serial-alloc", func(b *testing.B) {
				r := rand.New(rand.NewPCG(3, 4))
				var key []byte
				for b.Loop() {
					key = benchKey(key, r.Uint64N(records))
					p, _, _ := (sequinsPartitioner{}).Partition(key, benchFiles)
					if _, err := v.Get(p, key); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
