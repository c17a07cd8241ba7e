package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/spangledb/spangle"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/spangledb/spangle/edge/client"
	"github.com/spangledb/spangle/kvwatch/natsconn"
)

// Exit codes of spangle get.
const (
	exitFound   = 0
	exitMissing = 1 // 404: the key, or the db, is not there
	exitError   = 2
)

// get runs "spangle get DB KEY [KEY...]": for one key it prints the value
// on stdout and the status and version on stderr; for several, looked up
// in one batch (one version), a line "KEY<TAB>VALUE" per key found on
// stdout and a line per missing key on stderr. It returns the exit code:
// exitMissing when any key is missing.
func get(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("get", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClientFlags(fs)
	raw := fs.Bool("raw", false, "print the value's bytes as they are (default: quoted unless printable text, with a newline; one key only)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: spangle get [--http URL [--cacert FILE] | --nats URL] [--raw] DB KEY [KEY...]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(interleaved(fs, args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitError
	}
	if fs.NArg() < 2 {
		return exitCode(badArgs(fs, "get takes DB and at least one KEY, got %s", plural(fs.NArg(), "argument")), stderr)
	}
	db, keys := fs.Arg(0), fs.Args()[1:]
	if *raw && len(keys) > 1 {
		return exitCode(badArgs(fs, "--raw takes one key, got %d", len(keys)), stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cf.timeout)
	defer cancel()
	c, closeAll, err := cf.open()
	if err != nil {
		return failed(stderr, "spangle get", err)
	}
	defer closeAll()
	if len(keys) > 1 {
		return getMany(ctx, c, db, keys, stdout, stderr)
	}
	res, err := c.Get(ctx, db, []byte(keys[0]))
	switch {
	case errors.Is(err, client.ErrUnknownDB):
		fmt.Fprintf(stderr, "404 db %q unknown or without a version\n", db)
		return exitMissing
	case err != nil:
		return failed(stderr, "spangle get", err)
	case !res.Found:
		fmt.Fprintf(stderr, "404 version=%s\n", res.Version)
		return exitMissing
	}
	ct := res.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	fmt.Fprintf(stderr, "200 version=%s bytes=%d content-type=%s\n", res.Version, len(res.Value), ct)
	if *raw {
		stdout.Write(res.Value) //nolint:errcheck // nothing to do if stdout is gone
		return exitFound
	}
	fmt.Fprintln(stdout, printable(res.Value))
	return exitFound
}

// getMany looks keys up in one batch and prints them as get describes.
func getMany(ctx context.Context, c *client.Client, db string, keys []string, stdout, stderr io.Writer) int {
	bkeys := make([][]byte, len(keys))
	for i, k := range keys {
		bkeys[i] = []byte(k)
	}
	rs, err := c.GetMany(ctx, db, bkeys)
	switch {
	case errors.Is(err, client.ErrUnknownDB):
		fmt.Fprintf(stderr, "404 db %q unknown or without a version\n", db)
		return exitMissing
	case err != nil:
		return failed(stderr, "spangle get", err)
	}
	code, found := exitFound, 0
	for i, r := range rs {
		if !r.Found {
			fmt.Fprintf(stderr, "404 %s\n", printable([]byte(keys[i])))
			code = exitMissing
			continue
		}
		found++
		fmt.Fprintf(stdout, "%s\t%s\n", printable([]byte(keys[i])), printable(r.Value))
	}
	version := ""
	if len(rs) > 0 {
		version = rs[0].Version
	}
	fmt.Fprintf(stderr, "version=%s found=%d missing=%d\n", version, found, len(rs)-found)
	return code
}

// failed prints err as who's (a usage error as exitCode does) and returns
// exitError, get's and list's exit code for any error.
func failed(stderr io.Writer, who string, err error) int {
	if errors.As(err, new(usageError)) {
		return exitCode(err, stderr)
	}
	printErr(stderr, who, err)
	return exitError
}

// printable returns v as text when it is valid UTF-8 without control
// characters other than tabs and newlines, else Go-quoted.
func printable(v []byte) string {
	if utf8.Valid(v) {
		ok := true
		for _, r := range string(v) {
			if r < ' ' && r != '\t' && r != '\n' || r == 0x7f {
				ok = false
				break
			}
		}
		if ok {
			return string(v)
		}
	}
	return strconv.Quote(string(v))
}

// clientFlags are the flags that choose and tune a client: get, list
// and status.
type clientFlags struct {
	httpURL, natsURL, cluster, creds string
	timeout                          time.Duration
	tls                              *tlsFlags
	nc                               *nats.Conn // open's, with --nats
}

func addClientFlags(fs *flag.FlagSet) *clientFlags {
	cf := &clientFlags{tls: addTLSFlags(fs)}
	fs.StringVar(&cf.httpURL, "http", "", "a node's HTTP address (default "+spangle.LocalURL+" unless --nats)")
	fs.StringVar(&cf.natsURL, "nats", "", "NATS server URLs, comma-separated")
	fs.StringVar(&cf.cluster, "cluster", "spangle", "spangle cluster name (NATS)")
	fs.StringVar(&cf.creds, "creds", "", "NATS credentials file")
	fs.DurationVar(&cf.timeout, "timeout", 5*time.Second, "how long to try")
	return cf
}

// open returns a started client and a function that closes it (and the
// NATS connection it opened).
func (cf *clientFlags) open() (*client.Client, func(), error) {
	if cf.httpURL != "" && cf.natsURL != "" {
		return nil, nil, usagef("--http and --nats are exclusive")
	}
	cfg := client.DefaultConfig()
	cfg.ClusterName = cf.cluster
	cfg.Timeout = cf.timeout
	var nc *nats.Conn
	if cf.natsURL != "" {
		var err error
		o := natsconn.Options{Name: "spangle-cli", Timeout: cf.timeout, CredsFile: cf.creds}
		if nc, err = natsconn.Connect(cf.natsURL, o); err != nil {
			return nil, nil, fmt.Errorf("connect %s: %w", cf.natsURL, err)
		}
		cfg.Conn, cf.nc = nc, nc
	} else {
		u := cf.httpURL
		if u == "" {
			u = spangle.LocalURL
		}
		cfg.URLs = spangle.SplitList(u)
		tr, err := cf.tls.transport()
		if err != nil {
			return nil, nil, err
		}
		if tr != nil {
			cfg.Transport = tr
		}
	}
	c, err := client.New(cfg)
	if err == nil {
		err = c.Start()
	}
	if err != nil {
		if nc != nil {
			nc.Close()
		}
		return nil, nil, err
	}
	return c, func() {
		ctx, cancel := context.WithTimeout(context.Background(), cf.timeout)
		defer cancel()
		c.Close(ctx) //nolint:errcheck // exiting anyway
		if nc != nil {
			nc.Close()
		}
	}, nil
}

// interleaved reorders args so that flags given after the positional
// arguments ("spangle get db key --raw") are parsed too.
func interleaved(fs *flag.FlagSet, args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := a[1:]
		if name[0] == '-' {
			name = name[1:]
		}
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil && i+1 < len(args) {
			if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
				continue
			}
			i++
			flags = append(flags, args[i])
		}
	}
	return append(append(flags, "--"), pos...)
}
