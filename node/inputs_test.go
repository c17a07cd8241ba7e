package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hamba/avro/v2/ocf"
	"github.com/parquet-go/parquet-go"
)

type parquetKV struct {
	Key   string `parquet:"key"`
	Value string `parquet:"value,dict"`
}

// writeParquetVersion writes version of db as Spark does: files
// part-0000i-<uuid>-c000.snappy.parquet with keys key-0..key-(n-1) dealt
// round robin, their .crc files and _SUCCESS last.
func writeParquetVersion(t testing.TB, root, db, version string, files, n int) {
	t.Helper()
	dir := filepath.Join(root, db, version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range files {
		name := fmt.Sprintf("part-%05d-6f1c0e2a-51b3-4d3c-9a8e-0c3e5a1b7d2f-c000.snappy.parquet", i)
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		w := parquet.NewGenericWriter[parquetKV](f, parquet.Compression(&parquet.Snappy))
		for k := i; k < n; k += files {
			if _, err := w.Write([]parquetKV{{fmt.Sprintf("key-%d", k), fmt.Sprintf("%s:%d", version, k)}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "."+name+".crc"), []byte("crc\x00\x00\x02\x00"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "_SUCCESS"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestParquetVersions serves a directory of Spark's Parquet output with no
// configuration, and keeps serving it while versions that cannot be read
// fail, each naming its file and why.
func TestParquetVersions(t *testing.T) {
	root := t.TempDir()
	writeParquetVersion(t, root, "d", "1", 3, 50)
	n := newTestNode(t, root, nil)
	waitFor(t, "version 1", func() bool { return n.activeVersion("d") == "1" })
	for _, k := range []int{0, 1, 2, 49} {
		if res, err := n.get(t, "d", fmt.Sprintf("key-%d", k)); err != nil || string(res.Value) != fmt.Sprintf("1:%d", k) {
			t.Fatalf("key-%d: %+v %v", k, res, err)
		}
	}
	part1 := "part-00001-6f1c0e2a-51b3-4d3c-9a8e-0c3e5a1b7d2f-c000.snappy.parquet"
	tests := []struct {
		name  string
		edit  func(t *testing.T, dir string)
		error string
	}{
		{"truncated", func(t *testing.T, dir string) {
			p := filepath.Join(dir, part1)
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(p, fi.Size()/2); err != nil {
				t.Fatal(err)
			}
		}, "magic footer"},
		{"bad magic", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, part1), []byte("ORC\x00 is not a format read here"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "unknown format"},
		{"10 GB of nulls", func(t *testing.T, dir string) {
			if err := os.Truncate(filepath.Join(dir, part1), 10<<30); err != nil { // sparse, after the file's "PAR1"
				t.Fatal(err)
			}
		}, "invalid magic footer"},
		{"10 GB of nulls, no magic", func(t *testing.T, dir string) {
			p := filepath.Join(dir, part1)
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(p, 10<<30); err != nil {
				t.Fatal(err)
			}
		}, "unknown format"},
	}
	for i, tt := range tests {
		version := fmt.Sprint(i + 2)
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(root, "d", version)
			writeParquetVersion(t, root, "d", version, 3, 50)
			tt.edit(t, dir)
			n.Refresh()
			waitFor(t, "version "+version+" to fail", func() bool { return n.state("d", version) == StateError })
			st := n.Status().DBs["d"].Versions[version].Nodes["localhost"]
			if !strings.Contains(st.Error, part1) || !strings.Contains(st.Error, tt.error) {
				t.Errorf("error %q does not name the file and %q", st.Error, tt.error)
			}
			if res, err := n.get(t, "d", "key-3"); err != nil || string(res.Value) != "1:3" {
				t.Fatalf("after a failed build: %+v %v", res, err)
			}
		})
	}
}

// TestParquetColumns reads the columns a db names; a db whose files lack
// them fails naming the file and the column.
func TestParquetColumns(t *testing.T) {
	root := t.TempDir()
	writeParquetVersion(t, root, "named", "1", 2, 10)
	writeParquetVersion(t, root, "missing", "1", 2, 10)
	n := newTestNode(t, root, func(c *Config) {
		c.DBs = map[string]DBConfig{
			"named":   {Format: "parquet", KeyField: "value", ValueField: "key"},
			"missing": {KeyField: "id"},
		}
	})
	waitFor(t, "named/1", func() bool { return n.activeVersion("named") == "1" })
	if res, err := n.get(t, "named", "1:7"); err != nil || string(res.Value) != "key-7" {
		t.Fatalf("named: %+v %v", res, err)
	}
	waitFor(t, "missing/1 to fail", func() bool { return n.state("missing", "1") == StateError })
	st := n.Status().DBs["missing"].Versions["1"].Nodes["localhost"]
	// Both files lack the column, and they are read in parallel: the
	// error names whichever failed first.
	if !strings.Contains(st.Error, ".parquet: ") || !strings.Contains(st.Error, "part-0000") || !strings.Contains(st.Error, `no key column "id"`) {
		t.Errorf("error %q does not name the file and the column", st.Error)
	}
}

// TestAvroVersions serves a directory of Avro container files with no
// configuration; a truncated one fails naming the file while the old
// version keeps serving.
func TestAvroVersions(t *testing.T) {
	root := t.TempDir()
	write := func(version string, truncate bool) {
		dir := filepath.Join(root, "d", version)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			p := filepath.Join(dir, fmt.Sprintf("part-%05d.avro", i))
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			enc, err := ocf.NewEncoder(`{"type":"record","name":"KV","fields":[{"name":"key","type":"string"},{"name":"value","type":"string"}]}`,
				f, ocf.WithCodec(ocf.Deflate), ocf.WithBlockLength(10))
			if err != nil {
				t.Fatal(err)
			}
			for k := i; k < 40; k += 2 {
				if err := enc.Encode(map[string]any{"key": fmt.Sprintf("key-%d", k), "value": fmt.Sprintf("%s:%d", version, k)}); err != nil {
					t.Fatal(err)
				}
			}
			if err := enc.Close(); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if truncate && i == 1 {
				fi, _ := os.Stat(p)
				if err := os.Truncate(p, fi.Size()-20); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "_SUCCESS"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("1", false)
	n := newTestNode(t, root, nil)
	waitFor(t, "version 1", func() bool { return n.activeVersion("d") == "1" })
	if res, err := n.get(t, "d", "key-7"); err != nil || string(res.Value) != "1:7" {
		t.Fatalf("key-7: %+v %v", res, err)
	}
	write("2", true)
	n.Refresh()
	waitFor(t, "version 2 to fail", func() bool { return n.state("d", "2") == StateError })
	if st := n.Status().DBs["d"].Versions["2"].Nodes["localhost"]; !strings.Contains(st.Error, "part-00001.avro") {
		t.Errorf("error %q does not name the file", st.Error)
	}
	if res, err := n.get(t, "d", "key-7"); err != nil || string(res.Value) != "1:7" {
		t.Fatalf("after a failed build: %+v %v", res, err)
	}
}
