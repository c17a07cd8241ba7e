//go:build unix

package node

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

	"github.com/klauspost/compress/s2"
	bolt "go.etcd.io/bbolt"

	"github.com/spangledb/spangle/blocks/seqfile"
)

// writeListBenchVersion writes db "d" version "v1" under root: records
// keys "u%07d:%02d" (users of 100 items, so that a prefix "u0000042:"
// holds 100 keys) with ~100-byte JSON-like values, over 16 SequenceFiles,
// streaming.
func writeListBenchVersion(b *testing.B, root string, records int) {
	b.Helper()
	dir := filepath.Join(root, "d", "v1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	const files = 16
	r := rand.New(rand.NewPCG(1, 2))
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
			key = fmt.Appendf(key[:0], "u%07d:%02d", i/100, i%100)
			id := r.IntN(1e8)
			val = fmt.Appendf(val[:0], `{"id":%d,"name":"user-%d","city":"%s","score":%d,"pad":"%s"}`,
				id, id, []string{"berlin", "paris", "tokyo", "lima"}[r.IntN(4)], r.IntN(1000), "0123456789012345678901234")
			if err := w.Append(key, val); err != nil {
				b.Fatal(err)
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

// BenchmarkList measures, in one run on one node, listing a whole db in
// pages of 1000 keys ("list") against a bare bbolt cursor walk of the same
// partition files ("bare": entries visited, nothing decoded; with
// s2-blocks an entry is a block of ~30 records, so "bare+decode" also
// decodes each block, the least any reader of its keys does), and a
// 100-key prefix page ("prefix-page") against a 100-key batch GET of the
// same keys ("getmany-100"). keys/s is the figure; the ratios are the
// issue's.
//
//	go test -run '^$' -bench 'BenchmarkList/records=2000000' -benchtime 3x ./node
func BenchmarkList(b *testing.B) {
	for _, records := range []int{100_000, 2_000_000} {
		for _, comp := range []string{"none", "s2-blocks"} {
			b.Run(fmt.Sprintf("records=%d/%s", records, comp), func(b *testing.B) {
				root := b.TempDir()
				writeListBenchVersion(b, root, records)
				n := newTestNode(b, root, func(c *Config) {
					c.Compression = comp
					c.Logger = nil
				})
				waitFor(b, "v1 active", func() bool { return n.activeVersion("d") == "v1" })
				ctx := context.Background()
				// The machine may be shared: CPU time per key is the
				// steadier figure (the process's, over the loop).
				var cpu0 time.Duration
				start := func(b *testing.B) { b.ResetTimer(); cpu0 = processCPU() }
				report := func(b *testing.B, keys int) {
					b.ReportMetric(float64(keys)*float64(b.N)/b.Elapsed().Seconds(), "keys/s")
					b.ReportMetric(float64(processCPU()-cpu0)/float64(keys)/float64(b.N), "cpu-ns/key")
				}
				b.Run("list", func(b *testing.B) {
					var keys int
					start(b)
					for b.Loop() {
						keys = 0
						opts := ListOptions{Limit: 1000}
						for {
							page, err := n.List(ctx, "d", opts)
							if err != nil {
								b.Fatal(err)
							}
							keys += len(page.Keys)
							if page.Cursor == "" {
								break
							}
							opts.Cursor = page.Cursor
						}
					}
					if keys != records {
						b.Fatalf("listed %d keys, want %d", keys, records)
					}
					report(b, keys)
				})
				walk := func(b *testing.B, decode bool) {
					dir := filepath.Join(n.data, "dbs", "d", "v1")
					var dbs []*bolt.DB
					for p := range 16 {
						db, err := bolt.Open(filepath.Join(dir, fmt.Sprintf("p-%05d.bolt", p)), 0o444, &bolt.Options{ReadOnly: true})
						if err != nil {
							b.Fatal(err)
						}
						defer db.Close()
						dbs = append(dbs, db)
					}
					buf := make([]byte, 64<<10)
					var entries int
					start(b)
					for b.Loop() {
						entries = 0
						for _, db := range dbs {
							err := db.View(func(tx *bolt.Tx) error {
								c := tx.Bucket([]byte("data")).Cursor()
								for k, v := c.First(); k != nil; k, v = c.Next() {
									entries++
									if decode && len(v) > 5 {
										if _, err := s2.Decode(buf, v[5:]); err != nil {
											return err
										}
									}
								}
								return nil
							})
							if err != nil {
								b.Fatal(err)
							}
						}
					}
					b.ReportMetric(float64(entries), "entries")
					report(b, records) // keys reached: every entry's records
				}
				b.Run("bare", func(b *testing.B) { walk(b, false) })
				if comp == "s2-blocks" {
					b.Run("bare+decode", func(b *testing.B) { walk(b, true) })
				}
				users := records / 100
				b.Run("prefix-page", func(b *testing.B) {
					r := rand.New(rand.NewPCG(5, 6))
					var prefix []byte
					start(b)
					for b.Loop() {
						prefix = fmt.Appendf(prefix[:0], "u%07d:", r.IntN(users))
						page, err := n.List(ctx, "d", ListOptions{Prefix: prefix, Limit: 100, Values: true})
						if err != nil || len(page.Keys) != 100 {
							b.Fatalf("prefix %s: %d keys, %v", prefix, len(page.Keys), err)
						}
					}
					report(b, 100)
				})
				b.Run("getmany-100", func(b *testing.B) {
					r := rand.New(rand.NewPCG(5, 6))
					keys := make([][]byte, 100)
					start(b)
					for b.Loop() {
						u := r.IntN(users)
						for i := range keys {
							keys[i] = fmt.Appendf(keys[i][:0], "u%07d:%02d", u, i)
						}
						_, res, err := n.GetMany(ctx, "d", keys, GetOptions{})
						if err != nil || !res[99].Found {
							b.Fatal(err)
						}
					}
					report(b, 100)
				})
			})
		}
	}
}

// processCPU is the process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
