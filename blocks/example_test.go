package blocks_test

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"log"
	"os"

	"github.com/spangledb/spangle/blocks"
	"github.com/spangledb/spangle/blocks/seqfile"
)

// fnvPartitioner is a stand-in for a real partitioner.
type fnvPartitioner struct{}

func (fnvPartitioner) Partition(key []byte, n int) (int, int, error) {
	h := fnv.New32a()
	h.Write(key)
	p := int(h.Sum32() % uint32(n))
	return p, p, nil
}

// memFile is a SourceFile held in memory.
func memFile(name string, records ...string) blocks.SourceFile {
	var buf bytes.Buffer
	w, err := seqfile.NewWriter(&buf, seqfile.WriterOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for i := 0; i < len(records); i += 2 {
		if err := w.Append([]byte(records[i]), []byte(records[i+1])); err != nil {
			log.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}
	return blocks.SourceFile{Name: name, Size: int64(buf.Len()), Open: func(context.Context) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(buf.Bytes())), nil
	}}
}

func ExampleStore_Build() {
	dir, err := os.MkdirTemp("", "blocks-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := blocks.OpenStore(dir, blocks.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	v, err := s.Build(context.Background(), blocks.BuildSpec{
		DB: "names", Version: "2026-11-22",
		Files: []blocks.SourceFile{
			memFile("part-00000", "alice", "1", "bob", "2"),
			memFile("part-00001", "carol", "3", "alice", "4"), // a later duplicate wins
		},
		Partitioner:   fnvPartitioner{},
		PartitionerID: "fnv",
		Compression:   blocks.CompressionZstd,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer v.Close()

	for _, k := range []string{"alice", "bob", "dave"} {
		p, _, _ := fnvPartitioner{}.Partition([]byte(k), v.Manifest().NumPartitions)
		val, err := v.Get(p, []byte(k))
		fmt.Printf("%s: %q %v\n", k, val, err)
	}
	fmt.Println("records:", v.Manifest().Records)
	// Output:
	// alice: "4" <nil>
	// bob: "2" <nil>
	// dave: "" blocks: key not found
	// records: 3
}
