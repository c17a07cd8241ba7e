package main

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// TestCLIHelp: every subcommand's -h prints its usage and exits 0; a
// positional argument to serve (which would silently drop the flags after
// it) is an error; flags without a command (sequins' command line) go to
// serve; version names the build.
func TestCLIHelp(t *testing.T) {
	bin := buildBinary(t)
	for _, args := range [][]string{
		{"-h"}, {"help"}, {"serve", "-h"}, {"get", "-h"}, {"status", "-h"}, {"publish", "-h"}, {"activate", "-h"}, {"rollback", "-h"},
		{"inspect", "-h"}, {"plugin", "-h"}, {"plugin", "check", "-h"},
	} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Errorf("spangle %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		if !strings.Contains(strings.ToLower(string(out)), "usage") {
			t.Errorf("spangle %s printed no usage:\n%s", strings.Join(args, " "), out)
		}
	}

	out, err := exec.Command(bin, "serve", "other.toml", "--bind", "127.0.0.1:1").CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 || !strings.Contains(string(out), `"other.toml"`) {
		t.Errorf("serve with a positional: %v\n%s", err, out)
	}

	// sequins' command line (flags, no command, short ones too) is
	// serve's: the flags parse, and the positional is refused.
	for _, args := range [][]string{{"--local-store", "x", "other.toml"}, {"-l", "x", "-b=127.0.0.1:1", "-r", "y", "other.toml"}} {
		out, err = exec.Command(bin, args...).CombinedOutput()
		if !errors.As(err, &exit) || exit.ExitCode() == 0 || !strings.Contains(string(out), "serve takes no arguments") {
			t.Errorf("flags without a command %q: %v\n%s", args, err, out)
		}
	}

	out, err = exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "spangle ") || !strings.Contains(string(out), " go1.") {
		t.Errorf("version: %v %q", err, out)
	}
}
