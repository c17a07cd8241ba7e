package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/spangledb/spangle/edge/client"
)

// list runs "spangle list DB [PREFIX]": the db's keys, in bytewise order,
// one per line on stdout (printable, else Go-quoted), with --values a
// tab and the value; a summary line on stderr. It follows the nodes'
// cursors, all pages from one version; --timeout bounds each page.
// It returns the exit code: exitMissing for an unknown db.
func list(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClientFlags(fs)
	values := fs.Bool("values", false, "print each key's value after a tab")
	limit := fs.Int("limit", 0, "print at most this many keys (0: all)")
	start := fs.String("start", "", "list from this key (included)")
	end := fs.String("end", "", "list up to this key (excluded)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: spangle list [--http URL [--cacert FILE] | --nats URL] [--values] [--limit N] [--start KEY] [--end KEY] DB [PREFIX]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(interleaved(fs, args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitError
	}
	switch {
	case fs.NArg() < 1 || fs.NArg() > 2:
		return exitCode(badArgs(fs, "list takes DB and an optional PREFIX, got %s", plural(fs.NArg(), "argument")), stderr)
	case *limit < 0:
		return exitCode(badArgs(fs, "--limit %d: want a number of keys, or 0 for all", *limit), stderr)
	}
	c, closeAll, err := cf.open()
	if err != nil {
		return failed(stderr, "spangle list", err)
	}
	defer closeAll()
	opts := client.ListOptions{Prefix: []byte(fs.Arg(1)), Start: []byte(*start), End: []byte(*end), Values: *values}
	if *limit > 0 && *limit < 1000 {
		opts.PageSize = *limit
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	n := 0
	for e, err := range c.ListEntries(context.Background(), fs.Arg(0), opts) {
		switch {
		case errors.Is(err, client.ErrUnknownDB):
			w.Flush()
			fmt.Fprintf(stderr, "404 db %q unknown or without a version\n", fs.Arg(0))
			return exitMissing
		case err != nil:
			w.Flush()
			return failed(stderr, fmt.Sprintf("spangle list: after %d keys", n), err)
		}
		if *values {
			fmt.Fprintf(w, "%s\t%s\n", printable(e.Key), printable(e.Value))
		} else {
			fmt.Fprintln(w, printable(e.Key))
		}
		if n++; n == *limit {
			break
		}
	}
	w.Flush()
	fmt.Fprintf(stderr, "keys=%d\n", n)
	return exitFound
}
