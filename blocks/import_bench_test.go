package blocks

import (
	"context"
	"testing"
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
	s, err := OpenStore(b.TempDir(), Options{Logger: benchLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	cpu, last := loopVersions(b, s, func(version string) (*Version, error) {
		return s.Import(context.Background(), ImportSpec{DB: "db", Version: version, From: from,
			Partitions: parts, Fetch: fetchFrom(sv), Parallel: 2})
	})
	b.ReportMetric(float64(last.StoredBytes)*float64(b.N)/b.Elapsed().Seconds()/1e6, "MB/s")
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
}
