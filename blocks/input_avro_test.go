package blocks

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/hamba/avro/v2/ocf"

	"github.com/spangledb/spangle/blocks/avroin"
)

const kvSchema = `{"type":"record","name":"KV","fields":[{"name":"key","type":"bytes"},{"name":"value","type":"bytes"}]}`

type kvAvro struct {
	Key   []byte `avro:"key"`
	Value []byte `avro:"value"`
}

// avroWriter returns a dataset writer of Avro container files with codec
// and blocks of about blockLen records.
func avroWriter(codec ocf.CodecName, blockLen int) func(testing.TB, string, []record) {
	return func(t testing.TB, path string, recs []record) {
		t.Helper()
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		enc, err := ocf.NewEncoder(kvSchema, f, ocf.WithCodec(codec), ocf.WithBlockLength(blockLen))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if err := enc.Encode(kvAvro{r.k, r.v}); err != nil {
				t.Fatal(err)
			}
		}
		if err := enc.Close(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBuildAvro builds versions from Avro container files of every codec,
// detected by their magic bytes; files of Apache's writer are read in
// avroin's tests.
func TestBuildAvro(t *testing.T) {
	for i, codec := range []ocf.CodecName{ocf.Null, ocf.Deflate, ocf.Snappy, ocf.ZStandard} {
		t.Run(string(codec), func(t *testing.T) {
			d := makeDataset(t, datasetOpts{files: 3, perFile: 700, dupEvery: 9, seed: uint64(20 + i), write: avroWriter(codec, 100)})
			s := openTestStore(t, t.TempDir(), Options{})
			files := d.files(t)
			if i%2 == 1 {
				files = streamed(files)
			}
			v := build(t, s, BuildSpec{DB: "db", Version: "v1", Files: files})
			checkVersion(t, v, d)
		})
	}
	d := makeDataset(t, datasetOpts{files: 2, perFile: 10, seed: 30, write: avroWriter(ocf.Null, 100)})
	s := openTestStore(t, t.TempDir(), Options{})
	_, err := s.Build(context.Background(), BuildSpec{DB: "db", Version: "v1", Files: d.files(t), Partitioner: sequinsPartitioner{},
		KeyField: "id"})
	var aerr *avroin.Error
	if !errors.As(err, &aerr) || !strings.HasPrefix(aerr.File, "part-0000") || !strings.Contains(err.Error(), `no key field "id"`) {
		t.Fatalf("err = %v, want the missing field named", err)
	}
}
