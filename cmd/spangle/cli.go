package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spangledb/spangle"
	"github.com/spangledb/spangle/internal/errtext"
)

// newLogger is the commands' logger on stderr.
func newLogger(format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, usagef("--log-format %q: want text or json", format)
}

// shutdown stops s within timeout.
func shutdown(s *spangle.Server, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.Shutdown(ctx)
}

// usageError is a mistake on the command line (a missing or extra
// argument, a bad name): main prints it once, on one line, then the
// command's usage when it has one, and exits 2, as for a bad flag.
type usageError struct {
	msg   string
	usage func() // prints the command's usage; nil for none
}

func (e usageError) Error() string { return e.msg }

// usagef returns a usageError.
func usagef(format string, args ...any) error {
	return usageError{msg: fmt.Sprintf(format, args...)}
}

// badArgs returns a usageError that prints fs's usage after saying what
// is wrong.
func badArgs(fs *flag.FlagSet, format string, args ...any) error {
	return usageError{msg: fmt.Sprintf(format, args...), usage: fs.Usage}
}

// plural is n and noun, with an s unless n is 1: "1 argument", "3 arguments".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// errFlagPrinted is a bad flag: the flag package has printed it and the
// usage, so main only exits 2.
var errFlagPrinted = errors.New("bad flag")

// newFlagSet returns the flag set of a command whose usage (-h, or a bad
// flag) prints the usage line then the flags, on stderr.
func newFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), strings.TrimRight(usage, "\n"))
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args into fs: -h is flag.ErrHelp (exit 0), a bad flag
// errFlagPrinted (exit 2, already printed).
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return errFlagPrinted
}

// exitCode prints err (once) on stderr and returns the process's exit
// code: 0 for none or -h, 2 for a usage error (its line, then the
// command's usage), 1 for any other. The text printed is without the Go
// package prefixes the error gathered ("node: "; errtext).
func exitCode(err error, stderr io.Writer) int {
	var usage usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errFlagPrinted):
		return 2
	case errors.As(err, &usage):
		fmt.Fprintln(stderr, "spangle:", errtext.Strip(err.Error()))
		if usage.usage != nil {
			usage.usage()
		}
		return 2
	}
	printErr(stderr, "spangle", err)
	return 1
}

// printErr prints "who: err" on stderr, without the error's package
// prefixes.
func printErr(stderr io.Writer, who string, err error) {
	fmt.Fprintln(stderr, who+":", errtext.Strip(err.Error()))
}
