package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
		{"inspect", "-h"}, {"region-consumers", "-h"}, {"plugin", "-h"}, {"plugin", "check", "-h"},
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
// so without the package prefix "client: ".
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
	if n := strings.Count(out, "client: "); code != 2 || n != 0 || !strings.Contains(out, "no node answered") {
		t.Errorf("get with no node: exit %d (want 2), \"client: \" said %d times (want never: issue 38):\n%s", code, n, out)
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

// TestUsageErrors runs the binary with the mistakes of issue 38 item 3:
// each says what is wrong on its first line ("spangle: …"), a usage
// error then prints the command's usage and exits 2; no line carries a Go
// package prefix ("node: ", "blocks: ", "toml: ").
func TestUsageErrors(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	config := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte("source = "+strconv.Quote(dir)+"\n"+body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, tc := range []struct {
		args  []string
		code  int
		first string // in the first line
		usage bool   // the usage follows
	}{
		{[]string{"list", "--http", "http://127.0.0.1:1", "db", "--limit", "-1"}, 2, "--limit -1: want a number of keys, or 0 for all", true},
		{[]string{"list", "db", "prefix", "extra"}, 2, "list takes DB and an optional PREFIX, got 3 arguments", true},
		{[]string{"list"}, 2, "got 0 arguments", true},
		{[]string{"get", "--http", "http://127.0.0.1:1", "db"}, 2, "get takes DB and at least one KEY, got 1 argument", true},
		{[]string{"get", "--raw", "db", "k1", "k2"}, 2, "--raw takes one key, got 2", true},
		{[]string{"get", "--http", "http://a", "--nats", "nats://b", "db", "k"}, 2, "--http and --nats are exclusive", false},
		{[]string{"rollback"}, 2, "rollback takes DB and an optional VERSION, got 0 arguments", true},
		{[]string{"activate", "db"}, 2, "activate takes DB and VERSION (or --latest and DB), got 1 argument", true},
		{[]string{"activate", "--latest"}, 2, "activate --latest takes DB, got 0 arguments", true},
		{[]string{"inspect"}, 2, "inspect takes one FILE", true},
		{[]string{"ready", "extra"}, 2, "ready takes no arguments", true},
		{[]string{"serve", "--log-level", "verbose"}, 2, `--log-level "verbose": want debug, info, warn or error`, false},
		{[]string{"serve", "--log-format", "xml"}, 2, `--log-format "xml": want text or json`, false},
		{[]string{"serve"}, 2, "no source: give --source DIR|URL, or source = ", true},
		{[]string{"serve", "--config", config("hot.toml", "[storage]\nhot_cache = 0\n")}, 1, `a size is a string: write "0"`, false},
		{[]string{"serve", "--config", config("ttl.toml", "[nats]\nentry_ttl = 30\n")}, 1, `a duration is a string with a unit: write "30s"`, false},
		{[]string{"serve", "--config", config("list.toml", "[http]\nmax_list_keys = 0\n")}, 1, "http.max_list_keys = 0 is out of range", false},
		{[]string{"serve", "--config", config("batch.toml", "[http]\nmax_batch_keys = 0\n")}, 1, "http.max_batch_keys = 0 is out of range", false},
		{[]string{"serve", "--config", config("loads.toml", "max_parallel_loads = -1\n")}, 1, "invalid config: max_parallel_loads -1", false}, // was "node: invalid config: …"
		{[]string{"publish", "/no/such/dir", "--to", "nats-object://b", "--db", "a", "--version", "1"}, 2, "DIR /no/such/dir: no such file or directory", false},
	} {
		name := strings.Join(tc.args, " ")
		cmd := exec.Command(bin, tc.args...)
		cmd.Dir = dir // no spangle.toml here
		out, err := cmd.CombinedOutput()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatalf("spangle %s: %v", name, err)
		}
		first, rest, _ := strings.Cut(string(out), "\n")
		switch {
		case code != tc.code:
			t.Errorf("spangle %s: exit %d, want %d:\n%s", name, code, tc.code, out)
		case !strings.HasPrefix(first, "spangle: ") || !strings.Contains(first, tc.first):
			t.Errorf("spangle %s: first line %q, want \"spangle: …%s…\"", name, first, tc.first)
		case tc.usage != strings.HasPrefix(rest, "usage: spangle "):
			t.Errorf("spangle %s: usage after the first line %v, want %v:\n%s", name, !tc.usage, tc.usage, out)
		}
		if prefix := regexp.MustCompile(`(^|: )(node|blocks|batchwire|toml|client|edge|kvwatch): `).FindString(string(out)); prefix != "" {
			t.Errorf("spangle %s: a package prefix %q:\n%s", name, prefix, out)
		}
	}
}
