package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"unicode/utf8"

	"github.com/spangledb/spangle/blocks/seqfile"
	"github.com/spangledb/spangle/plugins"
)

// inspect prints a SequenceFile's header and its records, one per line.
func inspect(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("inspect", "usage: spangle inspect [-n N] [--partitions N [--partitioner NAME]] FILE", stderr)
	limit := fs.Int("n", -1, "print at most this many records (-1: all)")
	partitions := fs.Int("partitions", 0, "also print each key's partition among this many (0: don't)")
	partitioner := fs.String("partitioner", "sequins", "partitioner for --partitions: sequins, hadoop, murmur3")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return badArgs(fs, "inspect takes one FILE, got %s", plural(fs.NArg(), "argument"))
	}
	var part plugins.Partitioner
	if *partitions > 0 {
		p, err := plugins.Builtin(*partitioner)
		if err != nil {
			return err
		}
		part = p
	}
	name := fs.Arg(0)
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := seqfile.NewReader(f, name)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	h := r.Header()
	fmt.Fprintf(w, "file:        %s\n", name)
	fmt.Fprintf(w, "version:     %d\n", h.Version)
	fmt.Fprintf(w, "key class:   %s\n", h.KeyClass)
	fmt.Fprintf(w, "value class: %s\n", h.ValueClass)
	fmt.Fprintf(w, "compression: %s\n", h.Compression)
	if h.Codec != "" {
		fmt.Fprintf(w, "codec:       %s\n", h.Codec)
	}
	for _, m := range h.Metadata {
		fmt.Fprintf(w, "metadata:    %s = %s\n", quote([]byte(m.Key)), quote([]byte(m.Value)))
	}
	fmt.Fprintf(w, "sync:        %x\n\n", h.Sync)
	for n := 0; (*limit < 0 || n < *limit) && r.Next(); n++ {
		if part != nil {
			p, alt, err := part.Partition(r.Key(), *partitions)
			if err != nil {
				return err
			}
			if alt != p {
				fmt.Fprintf(w, "[p%d alt %d] ", p, alt)
			} else {
				fmt.Fprintf(w, "[p%d] ", p)
			}
		}
		fmt.Fprintf(w, "%s\t%s\n", quote(r.Key()), quote(r.Value()))
	}
	if err := r.Err(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%d records, %d bytes read\n", r.Records(), r.Offset())
	return nil
}

// quote prints printable UTF-8 as is and anything else Go-quoted.
func quote(b []byte) string {
	if utf8.Valid(b) {
		s := string(b)
		if strconv.CanBackquote(s) && s == strconv.Quote(s)[1:len(strconv.Quote(s))-1] {
			return s
		}
	}
	return strconv.Quote(string(b))
}
