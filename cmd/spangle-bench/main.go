package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := dispatch(ctx, os.Args[1], os.Args[2:])
	stop()
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "spangle-bench:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage:
  spangle-bench run [flags]        build, load and compare; see run -h
  spangle-bench gen --out DIR      write a dataset; see gen -h
  spangle-bench baseline --bind A  serve a fixed 100-byte body (--headers: with spangle's headers; --tls-cert, --tls-key: over HTTPS)
  spangle-bench scale [flags]      N nodes on a 3-server NATS cluster: coordination cost; see scale -h`)
}

func dispatch(ctx context.Context, cmd string, args []string) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	switch cmd {
	case "run":
		return runCmd(ctx, log, args)
	case "gen":
		return genCmd(log, args)
	case "baseline":
		return baselineCmd(ctx, args)
	case "scale":
		return scaleCmd(ctx, log, args)
	case "-h", "-help", "--help", "help":
		usage()
		return nil
	}
	usage()
	return fmt.Errorf("unknown command %q", cmd)
}

func genCmd(log *slog.Logger, args []string) error {
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	out := fs.String("out", "", "source root to write: `DIR`/<db>/<version>/part-NNNNN (required)")
	p := defaultGenParams()
	p.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() > 0 {
		fs.Usage()
		return errors.New("gen: --out is required and no arguments are taken")
	}
	cached, err := generate(*out, p)
	if err != nil {
		return err
	}
	log.Info("dataset ready", "dir", *out, "records", p.Records, "cached", cached)
	return nil
}

func baselineCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("baseline", flag.ContinueOnError)
	bind := fs.String("bind", "127.0.0.1:8080", "`address` to listen on")
	headers := fs.Bool("headers", false, "answer with the headers spangle sends with a value, precomputed")
	certFile := fs.String("tls-cert", "", "PEM certificate `file`: serve HTTPS (with --tls-key)")
	keyFile := fs.String("tls-key", "", "PEM key `file` of --tls-cert")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return serveBaseline(ctx, *bind, *headers, *certFile, *keyFile)
}
