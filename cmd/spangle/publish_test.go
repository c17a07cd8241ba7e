package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/kvwatch/natstest"
	"github.com/spangledb/spangle/node/source/objstore"
)

// TestPublishToObjectStore runs a node whose source is the NATS object
// store of its own embedded server, publishes two versions with the real
// "spangle publish", and reads them over HTTP: the node learns of each from
// the versions bucket, without polling. A second publish of the same
// directory uploads nothing; --delete removes a version's objects.
func TestPublishToObjectStore(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	s := startServe(t, bin, true, "--source", "nats-object://spangle-data")
	src := t.TempDir()
	// writeVersion's files differ on each write (a SequenceFile's sync
	// marker is random): each version is written once.
	writeVersion(t, src, "d", "v1", 3, 30)
	writeVersion(t, src, "d", "v2", 3, 30)
	publish := func(version string, args ...string) string {
		t.Helper()
		args = append([]string{"publish", filepath.Join(src, "d", version), "--to", "nats-object://spangle-data",
			"--db", "d", "--version", version, "--nats", s.nats}, args...)
		code, _, stderr := runCLI(t, bin, args...)
		if code != 0 {
			t.Fatalf("publish %s: exit %d\n%s", version, code, stderr)
		}
		return stderr
	}
	waitValue := func(key, want string) {
		t.Helper()
		waitFor(t, "GET /d/"+key+" = "+want, func() error {
			resp, err := http.Get(s.http + "/d/" + key)
			if err != nil {
				return err
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(body) != want {
				return fmt.Errorf("%d %q", resp.StatusCode, body)
			}
			return nil
		})
	}

	out := publish("v1")
	// stderr is not a terminal here: plain lines, then the summary.
	if !strings.Contains(out, "publishing d/v1: 3 files") || !strings.Contains(out, "3 uploaded, 0 skipped") ||
		strings.Contains(out, "\r") {
		t.Errorf("first publish: %s", out)
	}
	waitValue("key-7", "v1:7")
	out = publish("v1")
	if !strings.Contains(out, "0 uploaded, 3 skipped") {
		t.Errorf("second publish of the same files: %s", out)
	}
	if out := publish("v2", "--quiet", "--bandwidth", "10MiB"); out != "" {
		t.Errorf("--quiet printed %q", out)
	}
	waitValue("key-7", "v2:7")

	code, _, stderr := runCLI(t, bin, "publish", "--delete", "--to", "nats-object://spangle-data", "--nats", s.nats, "d", "v1")
	if code != 0 || !strings.Contains(stderr, fmt.Sprintf("deleted %d objects of d/v1", 4)) {
		t.Errorf("delete: exit %d: %s", code, stderr)
	}
	s.stop(t)
}

// TestPublishInterrupted runs "spangle publish" slowed by --bandwidth,
// kills it (SIGKILL) once its first file is stored, then interrupts a
// second run (SIGINT) once its second file is stored: neither leaves the
// version complete or announced, and each run skips the files stored by
// the runs before it; a last run completes the version.
func TestPublishInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	url := natstest.RunServer(t, nil).ClientURL()
	js := natstest.JetStream(t, url)
	dir := t.TempDir()
	const files, size = 4, 256 << 10
	r := rand.New(rand.NewPCG(1, 2))
	for i := range files {
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("part-%05d", i)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"publish", dir, "--to", "nats-object://data", "--db", "d", "--version", "v1", "--nats", url, "--parallel", "1"}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	// stored reports whether part-<i> is stored in full.
	stored := func(i int) bool {
		obs, err := js.ObjectStore(ctx, "data")
		if err != nil {
			return false
		}
		in, err := obs.GetInfo(ctx, objstore.ObjectName("d", "v1", fmt.Sprintf("part-%05d", i)))
		return err == nil && in.Size == size
	}
	// invisible checks that v1 is neither complete nor announced.
	invisible := func(after string) {
		t.Helper()
		obs, err := js.ObjectStore(ctx, "data")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := obs.GetInfo(ctx, objstore.ObjectName("d", "v1", "_SUCCESS")); !errors.Is(err, jetstream.ErrObjectNotFound) {
			t.Fatalf("after %s: _SUCCESS: %v; want not found", after, err)
		}
		kv, err := js.KeyValue(ctx, "spangle_spangle_versions")
		if err == nil {
			_, err = kv.Get(ctx, "d")
		}
		if !errors.Is(err, jetstream.ErrKeyNotFound) && !errors.Is(err, jetstream.ErrBucketNotFound) {
			t.Fatalf("after %s: announcement: %v; want none", after, err)
		}
	}
	// stopWhen starts a slowed run and sends sig once cond holds.
	stopWhen := func(sig os.Signal, cond func() bool) (int, string) {
		t.Helper()
		cmd := exec.Command(bin, append(args, "--bandwidth", "512KiB")...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		for !cond() {
			if ctx.Err() != nil {
				t.Fatalf("condition never met; stderr:\n%s", stderr.String())
			}
			time.Sleep(5 * time.Millisecond) // polling interval
		}
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("run stopped by %v: %v; want an error exit\n%s", sig, err, stderr.String())
		}
		return ee.ExitCode(), stderr.String()
	}

	stopWhen(syscall.SIGKILL, func() bool { return stored(0) })
	invisible("SIGKILL")
	code, out := stopWhen(syscall.SIGINT, func() bool { return stored(1) })
	if code != 1 || !strings.Contains(out, "not published") || !strings.Contains(out, "1 skipped") {
		t.Errorf("SIGINT: exit %d\n%s", code, out)
	}
	invisible("SIGINT")

	code, _, stderr := runCLI(t, bin, args...)
	skipped := -1
	if m := regexp.MustCompile(`(\d+) uploaded, (\d+) skipped`).FindStringSubmatch(stderr); m != nil {
		skipped, _ = strconv.Atoi(m[2])
	}
	if code != 0 || skipped < 2 {
		t.Fatalf("last run: exit %d, want at least 2 files skipped:\n%s", code, stderr)
	}
	obs, err := js.ObjectStore(ctx, "data")
	if err != nil {
		t.Fatal(err)
	}
	for i := range files {
		name := fmt.Sprintf("part-%05d", i)
		want, _ := os.ReadFile(filepath.Join(dir, name))
		got, err := obs.GetBytes(ctx, objstore.ObjectName("d", "v1", name))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: %d bytes, %v; want %d", name, len(got), err, len(want))
		}
	}
	if _, err := obs.GetInfo(ctx, objstore.ObjectName("d", "v1", "_SUCCESS")); err != nil {
		t.Fatalf("_SUCCESS after the last run: %v", err)
	}
}

// TestPublishProgress feeds a publish's events to the progress display,
// once as plain lines (not a terminal) and once as a bar.
func TestPublishProgress(t *testing.T) {
	events := func(p *publishProgress) {
		p.observe(objstore.Event{Kind: objstore.EventStart, Files: 3, Bytes: 3 << 20})
		p.observe(objstore.Event{Kind: objstore.EventSkipped, File: "a", Bytes: 1 << 20})
		p.progress(objstore.Report{Files: 3, Skipped: 1, Bytes: 3 << 20})
		p.observe(objstore.Event{Kind: objstore.EventSent, File: "b", Bytes: 1 << 19})
		p.observe(objstore.Event{Kind: objstore.EventRetry, File: "b", Attempt: 1, Wait: time.Second, Err: errors.New("boom")})
		p.observe(objstore.Event{Kind: objstore.EventSent, File: "b", Bytes: -(1 << 19)})
		for _, f := range []string{"b", "c"} {
			p.observe(objstore.Event{Kind: objstore.EventSent, File: f, Bytes: 1 << 20})
		}
		p.progress(objstore.Report{Files: 3, Uploaded: 2, Skipped: 1, Bytes: 3 << 20, BytesUploaded: 2 << 20, Retries: 1})
		p.finish(objstore.Report{Files: 3, Uploaded: 2, Skipped: 1, Bytes: 3 << 20, BytesUploaded: 2 << 20, Retries: 1}, true)
	}
	t.Run("lines", func(t *testing.T) {
		var b bytes.Buffer
		p := newPublishProgress(&b, false, "d/v1", time.Nanosecond)
		events(p)
		lines := strings.Split(strings.TrimSpace(b.String()), "\n")
		for _, want := range []string{
			"publishing d/v1: 3 files, 3.0 MiB",
			"b: attempt 1 failed, retrying in 1s: boom",
			"publishing d/v1: 3/3 files (2 uploaded, 1 skipped), 2.0 MiB/2.0 MiB sent",
		} {
			if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, want) }) {
				t.Errorf("no line starting %q in:\n%s", want, b.String())
			}
		}
		b.Reset()
		p = newPublishProgress(&b, false, "d/v1", time.Hour)
		events(p)
		if n := strings.Count(b.String(), "\n"); n != 2 { // the start line and the retry
			t.Errorf("%d lines with a 1h interval; want 2:\n%s", n, b.String())
		}
	})
	t.Run("bar", func(t *testing.T) {
		var b bytes.Buffer
		p := newPublishProgress(&b, true, "d/v1", time.Hour)
		events(p)
		out := b.String()
		for _, want := range []string{"d/v1 3/3 files (1 skipped)", "100%", "2.0/2.0 MiB", "b: attempt 1 failed"} {
			if !strings.Contains(out, want) {
				t.Errorf("bar output lacks %q:\n%q", want, out)
			}
		}
	})
}

func TestPublishFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"dir", "--to", "nats-object://b", "--db", "d", "--version", "v", "--bandwidth", "lots"}, "--bandwidth"},
		{[]string{"dir", "--to", "nats-object://b", "--db", "d", "--version", "v", "--op-timeout", "0s"}, "--op-timeout"},
		{[]string{"dir", "--to", "s3://b", "--db", "d", "--version", "v"}, "--to"},
		{[]string{"--to", "nats-object://b", "dir"}, "--db and --version"},
	} {
		err := publish(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("publish %q: %v; want an error about %s", tc.args, err, tc.want)
		}
		if tc.want == "--db and --version" && !errors.As(err, new(usageError)) {
			t.Errorf("publish %q: %v is not a usage error (exit 2)", tc.args, err)
		}
	}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Bool("quiet", false, "")
	fs.String("to", "", "")
	got := reorder(fs, []string{"dir", "--quiet", "--to", "x", "--to=y", "other"})
	if want := []string{"--quiet", "--to", "x", "--to=y", "dir", "other"}; !slices.Equal(got, want) {
		t.Errorf("reorder = %q, want %q", got, want)
	}
}

// TestPublishTouchesOnlyItsBuckets: spangle publish to a bare NATS
// server (a hub of regions, where no node runs) creates its Object Store
// bucket and the versions bucket, and no other (it used to create the
// nodes and partitions buckets too, empty: it ran a whole kvwatch.KV);
// --delete withdraws the announcement of the version it deletes, and
// keeps one of another version.
func TestPublishTouchesOnlyItsBuckets(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	s := natstest.RunServer(t, nil)
	js := natstest.JetStream(t, s.ClientURL())
	src := t.TempDir()
	writeVersion(t, src, "d", "v1", 2, 10)
	writeVersion(t, src, "e", "v1", 2, 10)
	for _, db := range []string{"d", "e"} {
		if code, _, stderr := runCLI(t, bin, "publish", filepath.Join(src, db, "v1"), "--to", "nats-object://data",
			"--db", db, "--version", "v1", "--nats", s.ClientURL()); code != 0 {
			t.Fatalf("publish %s: exit %d\n%s", db, code, stderr)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var streams []string
	for n := range js.StreamNames(ctx).Name() {
		streams = append(streams, n)
	}
	slices.Sort(streams)
	if want := []string{"KV_spangle_spangle_versions", "OBJ_data"}; !slices.Equal(streams, want) {
		t.Fatalf("streams %q, want %q", streams, want)
	}
	kv, err := js.KeyValue(ctx, "spangle_spangle_versions")
	if err != nil {
		t.Fatal(err)
	}
	if e, err := kv.Get(ctx, "d"); err != nil || !strings.Contains(string(e.Value()), `"v1"`) {
		t.Fatalf("announcement of d: %v", err)
	}
	if code, _, stderr := runCLI(t, bin, "publish", "--delete", "--to", "nats-object://data", "--nats", s.ClientURL(), "d", "v1"); code != 0 {
		t.Fatalf("delete d/v1: exit %d: %s", code, stderr)
	}
	if _, err := kv.Get(ctx, "d"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("d's announcement after its version's deletion: %v", err)
	}
	if code, _, stderr := runCLI(t, bin, "publish", "--delete", "--to", "nats-object://data", "--nats", s.ClientURL(), "e", "v0"); code != 0 {
		t.Fatalf("delete e/v0: exit %d: %s", code, stderr)
	}
	if _, err := kv.Get(ctx, "e"); err != nil {
		t.Errorf("e's announcement of v1 after v0's deletion: %v", err)
	}
}
