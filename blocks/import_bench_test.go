package blocks

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"
	"time"
)

// BenchmarkImport: a wiped node's share of the peercopy bench scenario's
// version (2,000,000 records, 16 partitions, 10 of them imported, two
// files at once as from two peers), copied from another store's files
// through a Fetch that checks each as it writes it (FileSum), as peer
// copies do: what Import adds to the network's time (writes, fsyncs).
func BenchmarkImport(b *testing.B) {
	const records = 2_000_000
	dir := b.TempDir()
	sv := buildBenchVersion(b, dir, writeBenchDataset(b, dir, records, true), CompressionS2Blocks)
	from := sv.Manifest()
	parts := []int{1, 2, 4, 5, 7, 8, 10, 11, 13, 14}
	fetch := func(ctx context.Context, p int, f *os.File) (PartitionInfo, error) {
		in, pi, err := sv.OpenPartitionFile(p)
		if err != nil {
			return pi, err
		}
		defer in.Close()
		sum, err := NewFileSum(pi.FileChecksum)
		if err != nil {
			return pi, err
		}
		if _, err := io.Copy(io.MultiWriter(f, sum), in); err != nil {
			return pi, err
		}
		return pi, sum.Check()
	}
	s, err := OpenStore(b.TempDir(), Options{Logger: benchLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var stored int64
	var cpu time.Duration
	i := 0
	for b.Loop() {
		i++
		c0 := cpuTime()
		v, err := s.Import(context.Background(), ImportSpec{DB: "db", Version: fmt.Sprint("v", i), From: from,
			Partitions: parts, Fetch: fetch, Parallel: 2})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cpu += cpuTime() - c0
		stored = v.Manifest().StoredBytes
		v.Close()
		if err := s.Remove("db", fmt.Sprint("v", i)); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(stored)*float64(b.N)/b.Elapsed().Seconds()/1e6, "MB/s")
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
}
