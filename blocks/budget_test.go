//go:build linux

package blocks

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hamba/avro/v2/ocf"
	"github.com/parquet-go/parquet-go"
)

const (
	budgetTestBudget = 16 << 20
	budgetChildEnv   = "SPANGLE_TEST_BUDGET_DIR"
	// budgetOverhead is what a build may take beyond its budget: its
	// loads' and writers' buffers, spill and merge buffers, the runtime's
	// own. Measured: 2 to 8 MiB with four loads (Parquet's the most).
	budgetOverhead = 12 << 20
)

// budgetRecords are 360k records of 16-byte keys and 24-byte values, 45
// bytes each in a chunk: 16 MB, under the budget, whose sort index (48
// bytes a record) is larger still.
func budgetRecords() [][]record {
	const files, n = 4, 360_000
	recs := make([][]record, files)
	key, val := []byte(nil), make([]byte, 24)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		key = benchKey(key, uint64(i))
		binary.LittleEndian.PutUint64(val, r.Uint64())
		binary.LittleEndian.PutUint64(val[8:], r.Uint64())
		binary.LittleEndian.PutUint64(val[16:], r.Uint64())
		recs[i%files] = append(recs[i%files], record{bytes.Clone(key), bytes.Clone(val)})
	}
	return recs
}

// TestBuildWithinBudget builds the same records from each input format in
// a child process, four loads and four writers at once, with the GC driven
// by GOMEMLIMIT half the budget (GOGC off), so that its RSS follows what
// it keeps live, and checks that the child's peak RSS, less that of a
// child building nothing, stays within the budget and budgetOverhead
// (measured: 18 to 24 MiB for a budget of 16). Without the sort index
// counted in the budget (memory.over, memory.fit) the chunks and the
// index of the four partitions sorted at once took 31 to 35 MiB.
func TestBuildWithinBudget(t *testing.T) {
	if dir := os.Getenv(budgetChildEnv); dir != "" {
		buildInBudget(t, dir)
		return
	}
	if raceEnabled {
		t.Skip("peak RSS under the race detector measures its shadow memory")
	}
	if testing.Short() {
		t.Skip("builds 360k records four times in child processes")
	}
	const limit = budgetTestBudget / 2
	recs := budgetRecords()
	base := childPeakRSS(t, "TestBuildWithinBudget", budgetChildEnv, "", limit)
	for _, format := range []struct {
		name  string
		write func(testing.TB, string, []record)
	}{
		{"sequencefile", writeSeqFile},
		{"parquet", parquetWriter(&parquet.Snappy, false, 64<<10)},
		{"avro", avroWriter(ocf.Snappy, 4096)},
		{"sparkey", nil},
	} {
		t.Run(format.name, func(t *testing.T) {
			dir := t.TempDir()
			if format.write == nil {
				writeBudgetSparkey(t, dir, recs)
			}
			for f, rs := range recs {
				if format.write != nil {
					format.write(t, filepath.Join(dir, fmt.Sprintf("part-%05d", f)), rs)
				}
			}
			peak := childPeakRSS(t, "TestBuildWithinBudget", budgetChildEnv, dir, limit)
			t.Logf("budget %d MiB: build peak RSS %d MiB over a child building nothing (%d MiB), bound %d MiB",
				budgetTestBudget>>20, (peak-base)>>20, base>>20, (budgetTestBudget+budgetOverhead)>>20)
			if peak-base > budgetTestBudget+budgetOverhead {
				t.Errorf("peak RSS %d MiB over a child building nothing: more than the budget (%d MiB) and %d MiB",
					(peak-base)>>20, budgetTestBudget>>20, budgetOverhead>>20)
			}
		})
	}
}

// buildInBudget, in the child, builds the files of dir ("-": none) and
// prints its peak RSS.
func buildInBudget(t *testing.T, dir string) {
	defer printPeakRSS(t)
	if dir == "-" {
		return
	}
	names := dirNames(t, dir)
	s := openTestStore(t, t.TempDir(), Options{MemoryBudget: budgetTestBudget, MaxParallelLoads: 4, MaxParallelWrites: 4})
	v := build(t, s, BuildSpec{DB: "db", Version: "v1", Files: sourceFiles(t, dir, names),
		Partitioner: sequinsPartitioner{}, Compression: CompressionS2Blocks})
	if m := v.Manifest(); m.Records != 360_000 {
		t.Fatalf("%d records", m.Records)
	}
}

// writeBudgetSparkey writes the records of recs as sequins' Sparkey input
// of len(recs) partitions: each partition's keys by sequins' hash, sorted.
func writeBudgetSparkey(t *testing.T, dir string, recs [][]record) {
	parts := make([][]record, len(recs))
	for _, rs := range recs {
		for _, r := range rs {
			p, _, _ := sequinsPartitioner{}.Partition(r.k, len(recs))
			parts[p] = append(parts[p], r)
		}
	}
	for p, rs := range parts {
		slices.SortFunc(rs, func(a, b record) int { return bytes.Compare(a.k, b.k) })
		writeSparkeyPair(t, filepath.Join(dir, fmt.Sprintf("part-%05d", p)), uint32(p+1), rs)
	}
}
