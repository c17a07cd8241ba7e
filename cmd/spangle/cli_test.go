package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strconv"
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

// TestCLIStyle runs the binary as a new user would (issue 29 item 4):
// every command's -h starts with a real usage line (serve, status and
// publish printed Go's bare "Usage of serve:"); a bad flag is printed once
// (serve printed it twice) and exits 2; a missing argument exits 2 for
// every command (inspect exited 1); a lookup with no node answering says
// "client: " once.
func TestCLIStyle(t *testing.T) {
	bin := buildBinary(t)
	run := func(args ...string) (string, int) {
		t.Helper()
		out, err := exec.Command(bin, args...).CombinedOutput()
		var exit *exec.ExitError
		switch {
		case err == nil:
			return string(out), 0
		case errors.As(err, &exit):
			return string(out), exit.ExitCode()
		}
		t.Fatalf("spangle %q: %v", args, err)
		return "", 0
	}
	commands := [][]string{{"serve"}, {"get"}, {"list"}, {"status"}, {"publish"}, {"activate"}, {"rollback"}, {"inspect"}, {"plugin", "check"}}
	for _, cmd := range commands {
		name := strings.Join(cmd, " ")
		t.Run(name, func(t *testing.T) {
			out, code := run(append(cmd, "-h")...)
			if code != 0 || !strings.HasPrefix(out, "usage: spangle "+name+" ") {
				t.Errorf("spangle %s -h: exit %d, want 0 and a first line \"usage: spangle %s …\":\n%s", name, code, name, out)
			}
			out, code = run(append(cmd, "--no-such-flag")...)
			if n := strings.Count(out, "-no-such-flag"); code != 2 || n != 1 {
				t.Errorf("spangle %s --no-such-flag: exit %d (want 2), the flag named %d times (want once):\n%s", name, code, n, out)
			}
		})
	}
	for _, args := range [][]string{{"inspect"}, {"get"}, {"list"}, {"list", "db", "prefix", "extra"}, {"get", "db"}, {"activate", "db"}, {"rollback"}, {"publish", "--to", "nats-object://b"},
		{"plugin"}, {"plugin", "check"}, {"status", "extra"}, {"serve", "extra"}, {"activate", "bad name", "1"}, {"nosuchcommand"}} {
		if out, code := run(args...); code != 2 {
			t.Errorf("spangle %q: exit %d, want 2 (a usage error):\n%s", args, code, out)
		}
	}
	out, code := run("get", "--http", "http://127.0.0.1:1", "--timeout", "2s", "baby-names", "1881/boy")
	if n := strings.Count(out, "client: "); code != 2 || n != 1 {
		t.Errorf("get with no node: exit %d (want 2), \"client: \" said %d times (want once):\n%s", code, n, out)
	}
}

// TestServeVersion: the server knows its release from the build info, as
// spangle version does (issue 29 item 2: the serve log said version=""
// and status --nats an empty release): in the start-up line, in the HTTP
// status and in the node entry that status --nats prints.
func TestServeVersion(t *testing.T) {
	bin := buildBinary(t)
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	// "spangle v… (rev …) go1.…": the release is what stands between.
	rel := strings.TrimSpace(strings.TrimPrefix(string(out), "spangle "))
	rel = rel[:strings.LastIndex(rel, " go")]
	if rel == "" {
		t.Fatalf("spangle version: %q", out)
	}
	s := startServe(t, bin, true)
	if want := `"version":` + strconv.Quote(rel); !strings.Contains(s.logs.String(), want) {
		t.Errorf("the serve log lacks %s:\n%s", want, s.logs.String())
	}
	var st struct{ Release string }
	req, _ := http.NewRequest("GET", s.http+"/", nil)
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
	}
	if err != nil || st.Release != rel {
		t.Errorf("status release %q, want %q (%v)", st.Release, rel, err)
	}
	waitFor(t, "status --nats to show the release", func() error {
		out, err := exec.Command(bin, "status", "--nats", s.nats).CombinedOutput()
		if err != nil || !strings.Contains(string(out), rel) {
			return fmt.Errorf("%v\n%s", err, out)
		}
		return nil
	})
	s.stop(t)
}
