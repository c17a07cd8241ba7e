//go:build ignore

// frame compresses a file with framed Snappy (the .spi.sz of sequins'
// Sparkey input): go run frame.go in out.
package main

import (
	"io"
	"log"
	"os"

	"github.com/klauspost/compress/snappy"
)

func main() {
	in, err := os.Open(os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	out, err := os.Create(os.Args[2])
	if err != nil {
		log.Fatal(err)
	}
	w := snappy.NewBufferedWriter(out)
	if _, err := io.Copy(w, in); err != nil {
		log.Fatal(err)
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}
	if err := out.Close(); err != nil {
		log.Fatal(err)
	}
}
