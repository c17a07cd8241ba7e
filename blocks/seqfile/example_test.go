package seqfile_test

import (
	"bytes"
	"fmt"
	"log"

	"github.com/spangledb/spangle/blocks/seqfile"
)

func Example() {
	var buf bytes.Buffer
	w, err := seqfile.NewWriter(&buf, seqfile.WriterOptions{
		Compression: seqfile.BlockCompressed,
		Codec:       seqfile.ZStandardCodec,
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, kv := range [][2]string{{"Alice", "Practice"}, {"Bob", "Hope"}} {
		if err := w.Append([]byte(kv[0]), []byte(kv[1])); err != nil {
			log.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}

	r, err := seqfile.NewReader(&buf, "example")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Header().Compression, r.Header().Codec)
	for r.Next() {
		fmt.Printf("%s → %s\n", r.Key(), r.Value())
	}
	if err := r.Err(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// BLOCK org.apache.hadoop.io.compress.ZStandardCodec
	// Alice → Practice
	// Bob → Hope
}

func ExampleError() {
	_, err := seqfile.NewReader(bytes.NewReader([]byte("This is not a SequenceFile")), "part-00000")
	fmt.Println(err)
	// Output:
	// seqfile: part-00000: offset 0: not a SequenceFile
}
