package blocks

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/s2"
	bolt "go.etcd.io/bbolt"
)

// BenchmarkScan lists every key of a version (records over benchFiles
// partitions), partition by partition with Reader.Iter ("iter"), against a
// bare bbolt cursor walk of the same files ("bare": entries visited, no
// value read; with s2-blocks an entry is a block, so "bare+decode" also
// decodes each block, the least any reader of its keys must do). keys/s
// is records listed per second; the ratio iter/bare is the figure.
//
//	go test -run '^$' -bench BenchmarkScan -benchtime 3x ./blocks
func BenchmarkScan(b *testing.B) {
	for _, records := range []int{100_000, 2_000_000} {
		dir := b.TempDir()
		names := writeBenchDataset(b, dir, records, true)
		for _, comp := range []Compression{CompressionNone, CompressionS2Blocks} {
			b.Run(fmt.Sprintf("records=%d/%s", records, comp), func(b *testing.B) {
				v := buildBenchVersion(b, dir, names, comp)
				report := func(b *testing.B, n int) {
					if n != records {
						b.Fatalf("listed %d keys, want %d", n, records)
					}
					b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "keys/s")
				}
				b.Run("iter", func(b *testing.B) {
					var n int
					for b.Loop() {
						n = 0
						err := v.View(func(r *Reader) error {
							for p := range benchFiles {
								it, err := r.Iter(p, Range{})
								if err != nil {
									return err
								}
								for it.Next() {
									n++
								}
								if err := it.Err(); err != nil {
									return err
								}
							}
							return nil
						})
						if err != nil {
							b.Fatal(err)
						}
					}
					report(b, n)
				})
				walk := func(b *testing.B, decode bool) {
					var dbs []*bolt.DB
					for p := range benchFiles {
						db, err := bolt.Open(filepath.Join(v.dir, partitionFile(p)), 0o444, &bolt.Options{ReadOnly: true})
						if err != nil {
							b.Fatal(err)
						}
						defer db.Close()
						dbs = append(dbs, db)
					}
					var n int
					buf := make([]byte, 0, 64<<10)
					for b.Loop() {
						n = 0
						for _, db := range dbs {
							err := db.View(func(tx *bolt.Tx) error {
								c := tx.Bucket(dataBucket).Cursor()
								for k, val := c.First(); k != nil; k, val = c.Next() {
									if !decode {
										n++
										continue
									}
									src, m, _, err := blockPayload(val, 1<<30)
									if err != nil {
										return err
									}
									raw, err := s2.Decode(buf[:cap(buf)], src)
									if err != nil || len(raw) != m {
										return fmt.Errorf("decode: %v", err)
									}
									n += countRecords(raw)
								}
								return nil
							})
							if err != nil {
								b.Fatal(err)
							}
						}
					}
					if comp == CompressionNone || decode {
						report(b, n)
					} else {
						b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "keys/s")
					}
				}
				b.Run("bare", func(b *testing.B) { walk(b, false) })
				if comp == CompressionS2Blocks {
					b.Run("bare+decode", func(b *testing.B) { walk(b, true) })
				}
			})
		}
	}
}

// countRecords counts the records of a decoded block without rebuilding
// their keys.
func countRecords(raw []byte) int {
	it := &Iter{block: raw, prefixed: true}
	n := 0
	for it.off < len(it.block) {
		if err := it.nextRecord(); err != nil {
			return -1
		}
		n++
	}
	return n
}
