package parquetin

import (
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

// TestDuckDBFiles reads files DuckDB wrote (testdata/duckdb/gen.mjs) with
// every common codec, plain and dictionary encodings, nulls, several row
// groups, and typed columns, and compares every value with what gen.mjs
// gave DuckDB.
func TestDuckDBFiles(t *testing.T) {
	const rows = 3000
	sum := func(i int) [16]byte { return md5.Sum([]byte(fmt.Sprint(i))) }
	key := func(i int) string { return fmt.Sprintf("key-%06d", i) }
	columns := map[string]func(i int) string{
		"value": func(i int) string {
			if i%13 == 0 {
				return "" // null: stored empty
			}
			s := sum(i)
			return hex.EncodeToString(s[:])
		},
		"cat": func(i int) string { return fmt.Sprintf("cat-%d", i%7) },
		"raw": func(i int) string { s := sum(i); return string(s[:]) },
	}
	for _, codec := range []string{"uncompressed", "snappy", "gzip", "zstd", "lz4_raw"} {
		for col, want := range columns {
			t.Run(codec+"/"+col, func(t *testing.T) {
				got, err := readAll(t, filepath.Join("testdata", "duckdb", "kv-"+codec+".parquet"), Options{Value: col})
				if codec == "lz4_raw" && col != "cat" {
					// Pages of random bytes compress less than 3:1, which
					// parquet-go misreads: refused, not read wrong.
					if err == nil || !strings.Contains(err.Error(), "misreads") {
						t.Fatalf("err = %v, want the page refused", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != rows {
					t.Fatalf("%d rows, want %d", len(got), rows)
				}
				for i, r := range got {
					if r.k != key(i) || r.v != want(i) {
						t.Fatalf("row %d = %q %q, want %q %q", i, r.k, r.v, key(i), want(i))
					}
				}
			})
		}
	}
	typed := filepath.Join("testdata", "duckdb", "typed.parquet")
	got, err := readAll(t, typed, Options{Key: "id", Value: "score"})
	if err != nil {
		t.Fatal(err)
	}
	got2, err := readAll(t, typed, Options{Key: "small", Value: "flag"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != rows || len(got2) != rows {
		t.Fatalf("%d and %d rows", len(got), len(got2))
	}
	for i := range rows {
		id := be64(int64(i)*1000003 - 500000000)
		score := string(binary.BigEndian.AppendUint64(nil, math.Float64bits(float64(i)/3)))
		flag := "\x00"
		if i%2 == 0 {
			flag = "\x01"
		}
		if got[i] != (rec{id, score}) || got2[i] != (rec{be32(int32(-i)), flag}) {
			t.Fatalf("row %d = %q %q, want %q %q", i, got[i], got2[i], rec{id, score}, rec{be32(int32(-i)), flag})
		}
	}
}
