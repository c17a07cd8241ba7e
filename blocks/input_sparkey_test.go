package blocks

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// sparkeyFiles copies the named files of dir into a new directory, under
// new names where rename says, and returns their SourceFiles, counting
// Opens per file in opened.
func sparkeyFiles(t *testing.T, dir string, rename map[string]string, opened *sync.Map) []SourceFile {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	var names []string
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".spl") && !strings.HasSuffix(name, ".spi.sz") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if n, ok := rename[name]; ok {
			name = n
		}
		if name == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(out, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	files := sourceFiles(t, out, names)
	for i := range files {
		open, name := files[i].Open, files[i].Name
		files[i].Open = func(ctx context.Context) (io.ReadCloser, error) {
			if opened != nil {
				n, _ := opened.LoadOrStore(name, new(int))
				*n.(*int)++
			}
			return open(ctx)
		}
	}
	return files
}

const sparkeyC = "sparkey/testdata/sparkey-c"

// expectedPuts reads the .expected files of a directory of gen.sh's.
func expectedPuts(t *testing.T, dir string) map[string]string {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "*.expected"))
	want := map[string]string{}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			kh, vh, _ := strings.Cut(sc.Text(), " ")
			k, _ := hex.DecodeString(kh)
			v, _ := hex.DecodeString(vh)
			want[string(k)] = string(v)
		}
		f.Close()
	}
	return want
}

// TestBuildSparkey builds versions from sequins' Sparkey files and from
// logs of the Sparkey C library: N is the number of partitions named,
// several logs per partition, each key checked against its log's
// partition, every value compared.
func TestBuildSparkey(t *testing.T) {
	s := openTestStore(t, t.TempDir(), Options{})
	v := build(t, s, BuildSpec{DB: "sequins", Version: "1", Files: sparkeyFiles(t, "sparkey/testdata/sequins", nil, nil)})
	if m := v.Manifest(); m.NumPartitions != 2 || m.Records != 4 {
		t.Fatalf("manifest: %d partitions, %d records", m.NumPartitions, m.Records)
	}
	for k, want := range map[string]string{"Alice": "Practice", "Betty": "White", "Charlie": "Chaplin", "Dylan": "Thomas"} {
		if got, err := v.Get(0, []byte(k)); err != nil || string(got) != want {
			t.Fatalf("Get(%s) = %q, %v", k, got, err)
		}
	}
	for _, dir := range []string{"snappy-4k", "none", "zstd-1k", "snappy-64"} {
		t.Run(dir, func(t *testing.T) {
			want := expectedPuts(t, filepath.Join(sparkeyC, dir))
			var opened sync.Map
			files := sparkeyFiles(t, filepath.Join(sparkeyC, dir), nil, &opened)
			// Hold partition 0 only: the logs of the others are not opened.
			v := build(t, s, BuildSpec{DB: "c", Version: dir, Files: files, Partitions: []int{0}, Compression: CompressionS2Blocks})
			m := v.Manifest()
			records := 0
			for k, val := range want {
				p, _, _ := sequinsPartitioner{}.Partition([]byte(k), m.NumPartitions)
				if p != 0 {
					continue
				}
				records++
				if got, err := v.Get(0, []byte(k)); err != nil || string(got) != val {
					t.Fatalf("Get(%s) = %d bytes, %v; want %d bytes", k, len(got), err, len(val))
				}
			}
			if m.Records != int64(records) {
				t.Fatalf("%d records, want %d", m.Records, records)
			}
			opened.Range(func(name, n any) bool {
				if !strings.HasPrefix(name.(string), "part-0") || (strings.HasPrefix(name.(string), "part-00001") || name == "part-1.spl" || name == "part-2.spl") {
					t.Errorf("%s of a partition not held was opened", name)
				}
				return true
			})
		})
	}
}

// TestSparkeyErrors: a key in the wrong partition's log, a missing index,
// other files among the logs and gaps in partition numbers fail the
// version, naming the file.
func TestSparkeyErrors(t *testing.T) {
	dir := filepath.Join(sparkeyC, "snappy-4k")
	tests := []struct {
		name   string
		rename map[string]string
		want   string
	}{
		{"misplaced keys", map[string]string{
			"part-00000.spl": "part-00001-00002.spl", "part-00000.spi.sz": "part-00001-00002.spi.sz",
			"part-00001-00000.spl": "part-00000.spl", "part-00001-00000.spi.sz": "part-00000.spi.sz"}, "belongs to partition"},
		{"missing index", map[string]string{"part-00001-00001.spi.sz": ""}, "has no index part-00001-00001.spi.sz"},
		{"gap", map[string]string{"part-00000.spl": "part-00002.spl", "part-00000.spi.sz": "part-00002.spi.sz"}, "want 0 to 1"},
		{"mixed", map[string]string{"part-00001-00001.spi.sz": "part-00001-00001.seq"}, "part-00001-00001.seq is not a Sparkey file"},
		{"index of another log", map[string]string{"part-00001-00001.spi.sz": "x.spi.sz", "part-00001-00000.spi.sz": "part-00001-00001.spi.sz",
			"part-00001-00000.spl": ""}, "indexes log"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openTestStore(t, t.TempDir(), Options{})
			_, err := s.Build(context.Background(), BuildSpec{DB: "db", Version: "v", Files: sparkeyFiles(t, dir, tt.rename, nil),
				Partitioner: sequinsPartitioner{}})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
			if tt.name == "misplaced keys" {
				var me *MisplacedKeyError
				if !errors.As(err, &me) || !strings.HasPrefix(me.File, "part-0000") || len(me.Key) == 0 {
					t.Fatalf("err = %v, want a MisplacedKeyError naming file and key", err)
				}
			}
		})
	}
}

// TestSparkeyAddPartitions: a node that takes over a partition (healing)
// reads that partition's logs only, as the build did.
func TestSparkeyAddPartitions(t *testing.T) {
	dir := filepath.Join(sparkeyC, "snappy-4k")
	want := expectedPuts(t, dir)
	var opened sync.Map
	files := sparkeyFiles(t, dir, nil, &opened)
	s := openTestStore(t, t.TempDir(), Options{})
	v := build(t, s, BuildSpec{DB: "db", Version: "v", Files: files, Partitions: []int{0}})
	opened.Clear()
	if err := s.AddPartitions(context.Background(), v, BuildSpec{DB: "db", Version: "v", Files: files,
		Partitioner: sequinsPartitioner{}, PartitionerID: "sequins", Partitions: []int{1}}); err != nil {
		t.Fatal(err)
	}
	opened.Range(func(name, _ any) bool {
		if strings.HasPrefix(name.(string), "part-00000") {
			t.Errorf("%s of a partition held already was opened", name)
		}
		return true
	})
	for k, val := range want {
		p, _, _ := sequinsPartitioner{}.Partition([]byte(k), 2)
		if got, err := v.Get(p, []byte(k)); err != nil || string(got) != val {
			t.Fatalf("Get(%d, %s) = %d bytes, %v", p, k, len(got), err)
		}
	}
}
