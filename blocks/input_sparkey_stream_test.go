package blocks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// builtStreamed returns the streamed_partitions of db's "blocks: built"
// line in a JSON log.
func builtStreamed(t *testing.T, log *syncBuffer, db string) int {
	t.Helper()
	log.mu.Lock()
	defer log.mu.Unlock()
	n := -1
	for line := range bytes.Lines(log.b.Bytes()) {
		var e struct {
			Msg      string `json:"msg"`
			DB       string `json:"db"`
			Streamed int    `json:"streamed_partitions"`
		}
		if json.Unmarshal(line, &e) == nil && e.Msg == "blocks: built" && e.DB == db {
			n = e.Streamed
		}
	}
	return n
}

// TestSparkeyStreamed builds Sparkey input whose partitions are written
// straight from their logs (one sorted log; two logs of disjoint ranges,
// named against their order, and an empty one) or, when their keys are
// not in order, loaded and sorted (a shuffled log; a key twice in a log;
// two logs whose ranges overlap, the later file's value winning), and the
// same records from SequenceFiles: each partition's digest and checksum
// are the same, with every compression (s2 and zstd sample the logs for
// their dictionaries first) and with some partitions held.
// The streamed partitions are counted in the build's log line (0 before
// the stream was built) and in its last progress.
func TestSparkeyStreamed(t *testing.T) {
	const n = 4
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(39, 1))
	parts := make([][]record, n)
	for i := range 4000 {
		k := fmt.Appendf(nil, "key-%07d", i)
		v := make([]byte, rng.IntN(300))
		if i%97 == 0 {
			v = make([]byte, 5000+rng.IntN(5000)) // spans blocks of the log
		}
		for j := range v {
			v[j] = byte(rng.IntN(64))
		}
		p, _, _ := sequinsPartitioner{}.Partition(k, n)
		parts[p] = append(parts[p], record{k, v})
	}
	want := map[string][]byte{}
	for _, recs := range parts {
		for _, r := range recs {
			want[string(r.k)] = r.v
		}
	}
	var names []string
	pair := func(base string, id uint32, recs []record) {
		writeSparkeyPair(t, filepath.Join(dir, base), id, recs)
		names = append(names, base+".spi.sz", base+".spl")
	}
	// Partition 0: one sorted log.
	pair("part-00000", 1, parts[0])
	// Partition 1: the upper half of its keys in the first file by name,
	// the lower half in the second, an empty log last.
	half := len(parts[1]) / 2
	pair("part-00001-00000", 2, parts[1][half:])
	pair("part-00001-00001", 3, parts[1][:half])
	pair("part-00001-00002", 4, nil)
	// Partition 2: shuffled, and one key twice (the second value wins).
	shuffled := slices.Clone(parts[2])
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	dup := record{shuffled[10].k, []byte("second value")}
	shuffled = slices.Insert(shuffled, 20, dup)
	want[string(dup.k)] = dup.v
	pair("part-00002", 5, shuffled)
	// Partition 3: two sorted logs whose ranges overlap; one key in both
	// (the later file's value wins).
	var a, b []record
	for i, r := range parts[3] {
		if i%3 == 0 {
			b = append(b, r)
		} else {
			a = append(a, r)
		}
	}
	over := record{b[5].k, []byte("earlier file's value")}
	a = append(a, over)
	slices.SortFunc(a, func(x, y record) int { return bytes.Compare(x.k, y.k) })
	pair("part-00003-00000", 6, a)
	pair("part-00003-00001", 7, b)
	slices.Sort(names)

	// The same records, last values, in SequenceFiles.
	seqDir := t.TempDir()
	var seqNames []string
	var all []record
	for k, v := range want {
		all = append(all, record{[]byte(k), v})
	}
	for f := range n {
		name := fmt.Sprintf("part-%05d", f)
		var recs []record
		for i := f; i < len(all); i += n {
			recs = append(recs, all[i])
		}
		writeSeqFile(t, filepath.Join(seqDir, name), recs)
		seqNames = append(seqNames, name)
	}

	for _, comp := range []Compression{CompressionNone, CompressionS2Blocks, CompressionS2, CompressionZstd} {
		for _, held := range [][]int{nil, {1, 2}} {
			if held == nil && (comp == CompressionS2 || comp == CompressionZstd) {
				continue // training their dictionaries takes seconds under -race
			}
			t.Run(fmt.Sprintf("%s/%v", comp, held), func(t *testing.T) {
				log := &syncBuffer{}
				s := openTestStore(t, t.TempDir(), Options{Logger: slog.New(slog.NewJSONHandler(log, nil)), MaxParallelWrites: 2})
				var last BuildProgress
				v := build(t, s, BuildSpec{DB: "spk", Version: "v", Files: sourceFiles(t, dir, names), Partitions: held,
					Compression: comp, Progress: func(p BuildProgress) { last = p }})
				ref := build(t, s, BuildSpec{DB: "seq", Version: "v", Files: sourceFiles(t, seqDir, seqNames), Partitions: held, Compression: comp})
				checkVersion(t, v, &dataset{want: want, n: n})
				got, wantInfo := v.Manifest().PartitionInfo, ref.Manifest().PartitionInfo
				if len(got) != len(wantInfo) {
					t.Fatalf("%d partitions, want %d", len(got), len(wantInfo))
				}
				for i := range got {
					if got[i].Partition != wantInfo[i].Partition || got[i].Digest != wantInfo[i].Digest || got[i].Checksum != wantInfo[i].Checksum || got[i].Records != wantInfo[i].Records {
						t.Errorf("partition %+v, want %+v", got[i], wantInfo[i])
					}
				}
				// The streamed partition 1 has its dictionary as the
				// sorted build's has: trained on a sample of its logs.
				if d, want := partitionDict(t, v, 1), partitionDict(t, ref, 1); d != want || (comp == CompressionS2 || comp == CompressionZstd) != d {
					t.Errorf("partition 1 has a dictionary: %v; the SequenceFile build's: %v", d, want)
				}
				if last.FilesDone != last.FilesTotal || last.BytesRead != last.BytesTotal {
					t.Errorf("progress at the end %+v: files or bytes not all done", last)
				}
				streamed := 2 // partitions 0 and 1
				if held != nil {
					streamed = 1
				}
				if got := builtStreamed(t, log, "spk"); got != streamed {
					t.Errorf("%d partitions streamed, want %d", got, streamed)
				}
				if last.StreamedPartitions != streamed {
					t.Errorf("progress at the end counts %d partitions streamed, want %d", last.StreamedPartitions, streamed)
				}
			})
		}
	}
}

// partitionDict reports whether v's partition p has a compression
// dictionary.
func partitionDict(t *testing.T, v *Version, p int) bool {
	t.Helper()
	part, err := openPartition(filepath.Join(v.dir, partitionFile(p)), p)
	if err != nil {
		t.Fatal(err)
	}
	defer part.db.Close()
	return part.sdict != nil || part.zdict != nil
}
