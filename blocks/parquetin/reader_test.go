package parquetin

import (
	"bytes"
	"encoding/binary"
	"encoding/csv"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type rec struct{ k, v string }

func readAll(t *testing.T, path string, opts Options) ([]rec, error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open(f, fi.Size(), filepath.Base(path), opts)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out []rec
	for r.Next() {
		out = append(out, rec{string(r.Key()), string(r.Value())})
	}
	if r.Err() == nil && int64(len(out)) != r.NumRows() {
		t.Errorf("%s: read %d records of %d rows", path, len(out), r.NumRows())
	}
	return out, r.Err()
}

func be32(i int32) string { return string(binary.BigEndian.AppendUint32(nil, uint32(i))) }
func be64(i int64) string { return string(binary.BigEndian.AppendUint64(nil, uint64(i))) }

const apache = "testdata/parquet-testing"

// TestApacheFiles reads files of Apache's parquet-testing, written by
// parquet-mr, Spark, Hive and Arrow, and compares every record with the
// values those files are documented to hold.
func TestApacheFiles(t *testing.T) {
	ids := []int32{4, 5, 6, 7, 2, 3, 0, 1}
	dates := []string{"03/01/09", "03/01/09", "04/01/09", "04/01/09", "02/01/09", "02/01/09", "01/01/09", "01/01/09"}
	var plain []rec
	for i, id := range ids {
		plain = append(plain, rec{be32(id), dates[i]})
	}
	var gz []rec
	for i := int64(1); i <= 513; i++ {
		gz = append(gz, rec{be64(i), be64(i)})
	}
	var fruit []rec
	for i := range 1000 {
		s := fmt.Sprintf("apple_banana_mango%d", i*i)
		fruit = append(fruit, rec{s, s})
	}
	tests := []struct {
		file, key, value string
		want             []rec
	}{
		{"alltypes_plain.parquet", "id", "date_string_col", plain},
		{"alltypes_plain.snappy.parquet", "id", "string_col", []rec{{be32(6), "0"}, {be32(7), "1"}}},
		{"alltypes_dictionary.parquet", "id", "string_col", []rec{{be32(0), "0"}, {be32(1), "1"}}},
		{"delta_byte_array.parquet", "c_customer_id", "c_email_address", expectCSV(t, 0, 7)},
		{"delta_length_byte_array.parquet", "FRUIT", "FRUIT", fruit},
		{"lz4_raw_compressed.parquet", "c0", "c1", []rec{
			{be64(1593604800), "abc"}, {be64(1593604800), "def"}, {be64(1593604801), "abc"}, {be64(1593604801), "def"}}},
		{"datapage_v2.snappy.parquet", "b", "a", []rec{
			{be32(1), "abc"}, {be32(2), "abc"}, {be32(3), "abc"}, {be32(4), ""}, {be32(5), "abc"}}},
		{"concatenated_gzip_members.parquet", "long_col", "long_col", gz},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := readAll(t, filepath.Join(apache, tt.file), Options{Key: tt.key, Value: tt.value})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("%d records, want %d", len(got), len(tt.want))
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("record %d = %q, want %q", i, got[i], tt.want[i])
				}
			}
		})
	}
}

// expectCSV reads delta_byte_array_expect.csv's columns k and v.
func expectCSV(t *testing.T, k, v int) []rec {
	b, err := os.ReadFile(filepath.Join(apache, "delta_byte_array_expect.csv"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var out []rec
	for _, r := range rows[1:] {
		out = append(out, rec{r[k], r[v]})
	}
	return out
}

func TestErrors(t *testing.T) {
	plain := filepath.Join(apache, "alltypes_plain.parquet")
	good, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	badFooter := bytes.Clone(good)
	copy(badFooter[len(badFooter)-8:], []byte{0xff, 0xff, 0xff, 0x7f})
	tests := []struct {
		name, path string
		opts       Options
		want       string
	}{
		{"no key column", plain, Options{Key: "nope", Value: "id"}, `no key column "nope"`},
		{"no value column", plain, Options{Key: "id"}, `no value column "value"`},
		{"int96 column", plain, Options{Key: "id", Value: "timestamp_col"}, "type INT96"},
		{"repeated column", filepath.Join(apache, "datapage_v2.snappy.parquet"), Options{Key: "b", Value: "e.list.element"}, "repeated"},
		{"null key", filepath.Join(apache, "nulls.snappy.parquet"), Options{Key: "b_struct.b_c_int", Value: "b_struct.b_c_int"}, "row 0: null key"},
		{"truncated", write("truncated.parquet", good[:len(good)/2]), Options{Key: "id", Value: "string_col"}, "magic footer"},
		{"bad magic", write("zeros.parquet", make([]byte, 4096)), Options{Key: "id", Value: "string_col"}, "magic header"},
		{"tiny", write("tiny.parquet", []byte("PAR1")), Options{}, "too short"},
		{"bad footer size", write("footer.parquet", badFooter), Options{Key: "id", Value: "string_col"}, "footer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readAll(t, tt.path, tt.opts)
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrFormat) {
				t.Fatalf("err = %v, want an *Error", err)
			}
			if e.File != filepath.Base(tt.path) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to name %s and say %q", err, filepath.Base(tt.path), tt.want)
			}
		})
	}
}

// TestCorruptPages flips bytes all over files of every codec: every read
// ends in an error or in records, never a panic or an allocation without
// bound (a corrupt LZ4_RAW page made the library double its buffer
// forever).
func TestCorruptPages(t *testing.T) {
	files := []struct{ file, key, value string }{
		{"alltypes_plain.snappy.parquet", "id", "string_col"},
		{"lz4_raw_compressed.parquet", "c0", "c1"},
		{"concatenated_gzip_members.parquet", "long_col", "long_col"},
		{"delta_length_byte_array.parquet", "FRUIT", "FRUIT"},
		{"datapage_v2.snappy.parquet", "b", "a"},
	}
	dir := t.TempDir()
	for _, f := range files {
		good, err := os.ReadFile(filepath.Join(apache, f.file))
		if err != nil {
			t.Fatal(err)
		}
		errs := 0
		for i := 4; i < len(good)-8; i += 3 {
			b := bytes.Clone(good)
			b[i] ^= 0x5a
			p := filepath.Join(dir, f.file)
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := readAll(t, p, Options{Key: f.key, Value: f.value}); err != nil {
				errs++
				if !errors.Is(err, ErrFormat) {
					t.Fatalf("%s, byte %d: %v is not ErrFormat", f.file, i, err)
				}
			}
		}
		t.Logf("%s: %d of %d corruptions refused", f.file, errs, (len(good)-12)/3)
	}
}
