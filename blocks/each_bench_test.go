package blocks

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkEach reads every record of a version (key and value), over
// benchFiles partitions, with Reader.Each and with the Iter loop it
// folds, in rounds of one run (each going first in every other); each/iter is the cost of the
// call per record (1 is none).
//
//	go test -run '^$' -bench BenchmarkEach -benchtime 20x ./blocks
func BenchmarkEach(b *testing.B) {
	const records = 500_000
	dir := b.TempDir()
	names := writeBenchDataset(b, dir, records, true)
	for _, comp := range []Compression{CompressionNone, CompressionS2Blocks} {
		b.Run(fmt.Sprint(comp), func(b *testing.B) {
			v := buildBenchVersion(b, dir, names, comp)
			var n int
			count := func([]byte, []byte) error { n++; return nil }
			each := func(r *Reader, p int) error { return r.Each(p, Range{}, count) }
			iter := func(r *Reader, p int) error {
				it, err := r.Iter(p, Range{})
				if err != nil {
					return err
				}
				for it.Next() {
					if _, err := it.Value(); err != nil {
						return err
					}
					n++
				}
				return it.Err()
			}
			var spent [2]time.Duration
			round := 0
			for b.Loop() {
				round++
				for j := range 2 {
					i := (j + round) % 2 // who goes first alternates
					read := [2]func(*Reader, int) error{each, iter}[i]
					n = 0
					start := time.Now()
					err := v.View(func(r *Reader) error {
						for p := range benchFiles {
							if err := read(r, p); err != nil {
								return err
							}
						}
						return nil
					})
					spent[i] += time.Since(start)
					if err != nil || n != records {
						b.Fatalf("read %d records (%v), want %d", n, err, records)
					}
				}
			}
			b.ReportMetric(spent[0].Seconds()/spent[1].Seconds(), "each/iter")
			b.ReportMetric(float64(records)*float64(b.N)/spent[0].Seconds(), "each-recs/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
