package blocks

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/parquet-go/parquet-go"

	"github.com/spangledb/spangle/blocks/sparkey"
)

// benchRecord is record i of the formats bench: a benchKey and a value of
// 90 to 110 random bytes, the same whatever the format.
func benchRecord(key, val []byte, i int) ([]byte, []byte) {
	key = benchKey(key, uint64(i))
	r := rand.New(rand.NewPCG(uint64(i), 9))
	val = val[:112]
	for j := 0; j < len(val); j += 8 {
		binary.LittleEndian.PutUint64(val[j:], r.Uint64())
	}
	return key, val[:90+r.IntN(21)]
}

// writeBenchParquet writes records over benchFiles snappy Parquet files
// (key and value columns, row groups of 64k rows), as writeBenchDataset
// deals them.
func writeBenchParquet(tb testing.TB, dir string, records int) []string {
	var names []string
	key, val := []byte(nil), make([]byte, 112)
	for f := range benchFiles {
		name := fmt.Sprintf("part-%05d.snappy.parquet", f)
		names = append(names, name)
		fh, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			tb.Fatal(err)
		}
		w := parquet.NewGenericWriter[kvRow](fh, parquet.Compression(&parquet.Snappy), parquet.MaxRowsPerRowGroup(64<<10))
		rows := make([]kvRow, 0, 1024)
		flush := func() {
			if _, err := w.Write(rows); err != nil {
				tb.Fatal(err)
			}
			rows = rows[:0]
		}
		for i := f; i < records; i += benchFiles {
			key, val = benchRecord(key, val, i)
			rows = append(rows, kvRow{bytes.Clone(key), bytes.Clone(val)})
			if len(rows) == cap(rows) {
				flush()
			}
		}
		flush()
		if err := w.Close(); err != nil {
			tb.Fatal(err)
		}
		if err := fh.Close(); err != nil {
			tb.Fatal(err)
		}
	}
	return names
}

// writeBenchSequence writes records over benchFiles SequenceFiles, dealt
// as writeBenchParquet deals them.
func writeBenchSequence(tb testing.TB, dir string, records int) []string {
	var names []string
	key, val := []byte(nil), make([]byte, 112)
	for f := range benchFiles {
		name := fmt.Sprintf("part-%05d", f)
		names = append(names, name)
		var recs []record
		for i := f; i < records; i += benchFiles {
			key, val = benchRecord(key, val, i)
			recs = append(recs, record{bytes.Clone(key), bytes.Clone(val)})
		}
		writeSeqFile(tb, filepath.Join(dir, name), recs)
	}
	return names
}

// writeBenchSparkey writes records as sequins' Sparkey input: one
// snappy-compressed log of sorted keys per partition (sequins' hash),
// part-%05d.spl, beside an index file that holds only the header a build
// reads (a build reads no more of it).
func writeBenchSparkey(tb testing.TB, dir string, records int) []string {
	parts := make([][]record, benchFiles)
	key, val := []byte(nil), make([]byte, 112)
	for i := range records {
		key, val = benchRecord(key, val, i)
		p, _, _ := sequinsPartitioner{}.Partition(key, benchFiles)
		parts[p] = append(parts[p], record{bytes.Clone(key), bytes.Clone(val)})
	}
	var names []string
	for p, recs := range parts {
		slices.SortFunc(recs, func(a, b record) int { return bytes.Compare(a.k, b.k) })
		base := fmt.Sprintf("part-%05d", p)
		writeSparkeyPair(tb, filepath.Join(dir, base), uint32(p+1), recs)
		names = append(names, base+".spi.sz", base+".spl")
	}
	slices.Sort(names)
	return names
}

// writeSparkeyPair writes recs, sorted, as base.spl, a snappy log of 4 KiB
// blocks, and base.spi.sz, an index holding only the header a build reads.
func writeSparkeyPair(tb testing.TB, base string, id uint32, recs []record) {
	writeSparkeyLog(tb, base+".spl", id, recs, 4096)
	var hdr [16]byte
	binary.LittleEndian.PutUint32(hdr[0:], sparkey.HashMagic)
	binary.LittleEndian.PutUint32(hdr[4:], 1)
	binary.LittleEndian.PutUint32(hdr[8:], 1)
	binary.LittleEndian.PutUint32(hdr[12:], id)
	var buf bytes.Buffer
	sw := snappy.NewBufferedWriter(&buf)
	sw.Write(hdr[:])
	sw.Close()
	if err := os.WriteFile(base+".spi.sz", buf.Bytes(), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// writeSparkeyLog writes a snappy-compressed Sparkey log of puts, blocks
// of about blockSize bytes (an entry larger spans blocks).
func writeSparkeyLog(tb testing.TB, path string, id uint32, recs []record, blockSize int) {
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	var hdr [84]byte
	bw.Write(hdr[:])
	end, maxK, maxV, maxE := uint64(84), 0, 0, 0
	var block, comp []byte
	entries := 0
	flush := func() {
		if len(block) == 0 {
			return
		}
		comp = snappy.Encode(comp[:cap(comp)], block)
		n := binary.PutUvarint(hdr[:], uint64(len(comp)))
		bw.Write(hdr[:n])
		bw.Write(comp)
		end += uint64(n + len(comp))
		block, maxE, entries = block[:0], max(maxE, entries), 0
	}
	for _, r := range recs {
		e := binary.AppendUvarint(nil, uint64(len(r.k)+1))
		e = binary.AppendUvarint(e, uint64(len(r.v)))
		e = append(append(e, r.k...), r.v...)
		if len(block)+len(e) > blockSize {
			flush()
		}
		for len(e) > blockSize { // an entry larger than a block spans blocks
			block = append(block, e[:blockSize]...)
			e = e[blockSize:]
			flush()
		}
		block = append(block, e...)
		entries++
		maxK, maxV = max(maxK, len(r.k)), max(maxV, len(r.v))
	}
	flush()
	if err := bw.Flush(); err != nil {
		tb.Fatal(err)
	}
	le := binary.LittleEndian
	le.PutUint32(hdr[0:], sparkey.LogMagic)
	le.PutUint32(hdr[4:], 1)
	le.PutUint32(hdr[8:], 0)
	le.PutUint32(hdr[12:], id)
	le.PutUint64(hdr[16:], uint64(len(recs)))
	le.PutUint64(hdr[24:], 0)
	le.PutUint64(hdr[32:], end)
	le.PutUint64(hdr[40:], uint64(maxK))
	le.PutUint64(hdr[48:], uint64(maxV))
	le.PutUint64(hdr[56:], 0)
	le.PutUint32(hdr[64:], sparkey.CompressionSnappy)
	le.PutUint32(hdr[68:], uint32(blockSize))
	le.PutUint64(hdr[72:], end-84)
	le.PutUint32(hdr[80:], uint32(maxE))
	if _, err := f.WriteAt(hdr[:], 0); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
}

// formatsOut, when set, makes TestWriteBenchFormats write the formats
// bench's Sparkey input and SequenceFiles there, for servers to read
// (docs/PERFORMANCE.md runs sequins and spangle on them).
var formatsOut = flag.String("formats-out", "", "directory to write BenchmarkBuildFormats' Sparkey and SequenceFile input to (TestWriteBenchFormats)")

// TestWriteBenchFormats writes BenchmarkBuildFormats' 2M records as
// Sparkey input to <formats-out>/sparkey and as SequenceFiles to
// <formats-out>/sequencefile; without -formats-out it is skipped.
func TestWriteBenchFormats(t *testing.T) {
	if *formatsOut == "" {
		t.Skip("no -formats-out")
	}
	for name, write := range map[string]func(testing.TB, string, int) []string{"sparkey": writeBenchSparkey, "sequencefile": writeBenchSequence} {
		dir := filepath.Join(*formatsOut, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, dir, 2_000_000)
	}
}

// peakHeap samples the heap in use until stop is called, and returns the
// largest sample.
func peakHeap() (stop func() uint64) {
	var peak uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-t.C:
			case <-done:
				return
			}
		}
	})
	return func() uint64 { close(done); wg.Wait(); return peak }
}

// fastEncoding makes BenchmarkBuildFormats build each format a second
// time with S2's default encoding for the blocks instead of its better one.
var fastEncoding = flag.Bool("fast-encoding", false, "BenchmarkBuildFormats: build each format with S2's default block encoding too")

// BenchmarkBuildFormats builds the same 2M records (16-byte keys, 90 to
// 110-byte random values) from SequenceFiles, snappy Parquet files and
// sequins' Sparkey input (snappy logs of sorted keys, one per partition),
// s2-blocks as a node stores them: a build is a version's start to
// serving. Run the three in one invocation and compare their ns/op:
//
//	go test -run '^$' -bench BuildFormats -benchtime 3x -count 3 ./blocks/
//
// With -args -fast-encoding each is built with S2's default block
// encoding too (…/fast-encoding), paired in the same run. Each run logs
// the paired ratios of SequenceFiles' seconds and CPU per build to each
// other format's.
func BenchmarkBuildFormats(b *testing.B) {
	const records = 2_000_000
	root := b.TempDir()
	took := map[string][][2]float64{} // by sub-benchmark, a run each (-count): seconds and CPU-s per build
	for _, bc := range []struct {
		name  string
		write func(testing.TB, string, int) []string
	}{
		{"sequencefile", writeBenchSequence},
		{"parquet-snappy", writeBenchParquet},
		{"sparkey-snappy", writeBenchSparkey},
	} {
		dir := filepath.Join(root, bc.name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		names := bc.write(b, dir, records)
		runtime.GC()
		for _, fast := range []bool{false, true} {
			if fast && !*fastEncoding {
				continue
			}
			name := bc.name
			if fast {
				name += "/fast-encoding"
			}
			b.Run(name, func(b *testing.B) {
				if fast {
					useFastEncoding(b)
				}
				wall, cpu := buildFormat(b, dir, names, records)
				took[name] = append(took[name], [2]float64{wall, cpu})
				logRatios(b, took, name, bc.name)
			})
		}
	}
}

// logRatios logs the paired ratios of the run of sub-benchmark name just
// ended (format f, with the default encoding when name is not f) with the
// same run (-count) of SequenceFiles' and, for the default encoding, of
// f's with the better one: seconds and CPU per build.
func logRatios(b *testing.B, took map[string][][2]float64, name, f string) {
	runs := took[name]
	i, t := len(runs)-1, runs[len(runs)-1]
	ref := "sequencefile" + strings.TrimPrefix(name, f)
	if r := took[ref]; name != ref && len(r) > i {
		b.Logf("%s over %s: %.2fx the seconds, %.2fx the CPU", ref, name, r[i][0]/t[0], r[i][1]/t[1])
	}
	if r := took[f]; name != f && len(r) > i {
		b.Logf("%s over %s: %.2fx the seconds, %.2fx the CPU", name, f, t[0]/r[i][0], t[1]/r[i][1])
	}
}

// buildFormat builds the files names of dir, records in all, as
// BenchmarkBuildFormats says, and returns the seconds and CPU-seconds per
// build.
func buildFormat(b *testing.B, dir string, names []string, records int64) (wall, cpuPer float64) {
	files := sourceFiles(b, dir, names)
	s, err := OpenStore(b.TempDir(), Options{Logger: benchLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var cpu time.Duration
	var peak uint64
	i := 0
	for b.Loop() {
		i++
		runtime.GC()
		c0 := cpuTime()
		stop := peakHeap()
		v, err := s.Build(context.Background(), BuildSpec{DB: "db", Version: fmt.Sprint("v", i),
			Files: files, Partitioner: sequinsPartitioner{}, Compression: CompressionS2Blocks})
		peak = max(peak, stop())
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cpu += cpuTime() - c0
		if v.Manifest().Records != records {
			b.Fatalf("%d records", v.Manifest().Records)
		}
		v.Close()
		if err := s.Remove("db", fmt.Sprint("v", i)); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
	// CPU seconds per second of a build: how many cores it kept
	// busy (the machine's load takes its share too).
	b.ReportMetric(cpu.Seconds()/b.Elapsed().Seconds(), "cores")
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	return b.Elapsed().Seconds() / float64(b.N), cpu.Seconds() / float64(b.N)
}
