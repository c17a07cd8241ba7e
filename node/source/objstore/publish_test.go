package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/kvwatch/natstest"
	"github.com/spangledb/spangle/node/source/objstore"
)

// writeFiles writes files random files of size bytes (part-0, part-1, …)
// into a new directory and returns it.
func writeFiles(t *testing.T, files, size int) string {
	t.Helper()
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(uint64(files), uint64(size)))
	for i := range files {
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("part-%d", i)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// checkPublished checks that version v of db is complete in obs and that
// its data objects are exactly the files of dir.
func checkPublished(t *testing.T, obs jetstream.ObjectStore, dir, db, v string) {
	t.Helper()
	c := ctx(t)
	if _, err := obs.GetInfo(c, objstore.ObjectName(db, v, "_SUCCESS")); err != nil {
		t.Fatalf("%s/%s has no _SUCCESS: %v", db, v, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		want, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		got, err := obs.GetBytes(c, objstore.ObjectName(db, v, e.Name()))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("object %s: %d bytes, %v; want the file's %d bytes", e.Name(), len(got), err, len(want))
		}
	}
}

// visible reports whether version v of db is listed by a node requiring
// _SUCCESS.
func visible(t *testing.T, js jetstream.JetStream, db, v string) bool {
	t.Helper()
	src, err := objstore.New("data", func(context.Context) (jetstream.JetStream, error) { return js, nil })
	if err != nil {
		t.Fatal(err)
	}
	vs, err := src.ListVersions(ctx(t), db, true)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Contains(vs, v)
}

// events records a Publish's events; safe for concurrent use.
type events struct {
	mu      sync.Mutex
	sent    int64 // sum of EventSent bytes
	retries []objstore.Event
	skipped []string
	hook    func(objstore.Event) // called after recording, outside the lock
}

func (e *events) observe(ev objstore.Event) {
	e.mu.Lock()
	switch ev.Kind {
	case objstore.EventSent:
		e.sent += ev.Bytes
	case objstore.EventRetry:
		e.retries = append(e.retries, ev)
	case objstore.EventSkipped:
		e.skipped = append(e.skipped, ev.File)
	}
	hook := e.hook
	e.mu.Unlock()
	if hook != nil {
		hook(ev)
	}
}

// limitBucket sets the bucket's byte limit: with a limit below a file's
// size the server rejects its chunks (the Object Store discards new
// messages over the limit), a real failure that retries can outlast.
func limitBucket(t *testing.T, js jetstream.JetStream, maxBytes int64) {
	t.Helper()
	if _, err := js.UpdateObjectStore(ctx(t), jetstream.ObjectStoreConfig{Bucket: "data", MaxBytes: maxBytes}); err != nil {
		t.Fatal(err)
	}
}

func TestPublishRetries(t *testing.T) {
	const size = 300 << 10 // three chunks
	for _, tc := range []struct {
		name      string
		retries   int
		freeAfter int // lift the limit after this many failed attempts; 0: never
		wantErr   bool
	}{
		{name: "transient", retries: 5, freeAfter: 2},
		{name: "retries spent", retries: 2, wantErr: true},
		{name: "no retries", retries: -1, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js, obs := startBucket(t)
			c := ctx(t)
			limitBucket(t, js, 64<<10)
			dir := writeFiles(t, 2, size)
			ev := &events{}
			ev.hook = func(e objstore.Event) {
				if e.Kind == objstore.EventRetry && e.Attempt == tc.freeAfter {
					limitBucket(t, js, -1)
				}
			}
			rep, err := objstore.Publish(c, obs, dir, "db", "v1", objstore.PublishOptions{
				Parallel: 1, Retries: tc.retries, Backoff: time.Millisecond, BackoffMax: 2 * time.Millisecond, Observe: ev.observe,
			})
			wantRetries := max(tc.retries, 0)
			if tc.freeAfter > 0 {
				wantRetries = tc.freeAfter
			}
			if len(ev.retries) != wantRetries || rep.Retries != wantRetries {
				t.Fatalf("%d retry events, Report.Retries %d; want %d", len(ev.retries), rep.Retries, wantRetries)
			}
			for i, e := range ev.retries {
				// The pause doubles up to BackoffMax, drawn from its upper half.
				if want := min(time.Millisecond<<i, 2*time.Millisecond); e.Attempt != i+1 || e.Wait < want/2 || e.Wait > want || e.File != "part-0" || e.Err == nil {
					t.Errorf("retry %d: %+v; want attempt %d of part-0 after [%v, %v]", i, e, i+1, want/2, want)
				}
			}
			if tc.wantErr {
				if err == nil {
					t.Fatal("Publish succeeded over a full bucket")
				}
				if visible(t, js, "db", "v1") {
					t.Fatal("a failed publish made the version visible")
				}
				if ev.sent != 0 {
					t.Errorf("sent bytes sum to %d after failed uploads; want 0", ev.sent)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rep.Uploaded != 2 || rep.BytesUploaded != 2*size || ev.sent != 2*size {
				t.Errorf("report %+v, sent %d; want 2 files, %d bytes", rep, ev.sent, 2*size)
			}
			checkPublished(t, obs, dir, "db", "v1")
		})
	}
}

// TestPublishLocalErrorNotRetried: a file that vanishes before its upload
// fails the publish at once, without retries.
func TestPublishLocalErrorNotRetried(t *testing.T) {
	js, obs := startBucket(t)
	c := ctx(t)
	dir := writeFiles(t, 2, 1000)
	rep, err := objstore.Publish(c, obs, dir, "db", "v1", objstore.PublishOptions{
		Parallel: 1, Backoff: time.Millisecond,
		Progress: func(objstore.Report) { os.Remove(filepath.Join(dir, "part-1")) },
	})
	if !errors.Is(err, os.ErrNotExist) || rep.Retries != 0 || rep.Uploaded != 1 {
		t.Fatalf("Publish = %+v, %v; want a not-exist error, no retries, 1 file uploaded", rep, err)
	}
	if visible(t, js, "db", "v1") {
		t.Fatal("version visible")
	}
}

// TestPublishServerRestart stops the NATS server in the middle of an
// upload, waits until an upload has failed for it, and starts the server
// again on the same port and store: the client reconnects, the failed
// uploads are retried, and the version ends up complete and intact.
func TestPublishServerRestart(t *testing.T) {
	opts := &server.Options{StoreDir: t.TempDir()}
	s := natstest.RunServer(t, opts)
	opts.Port = s.Addr().(*net.TCPAddr).Port // the restarted server listens there too
	nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	// Lost acknowledgements fail an attempt after this timeout.
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	c := ctx(t)
	obs, err := objstore.CreateBucket(c, js, "data", 1)
	if err != nil {
		t.Fatal(err)
	}
	const files, size = 4, 1 << 20
	dir := writeFiles(t, files, size)
	midway, retried := make(chan struct{}), make(chan struct{})
	var midOnce, retryOnce sync.Once
	ev := &events{}
	ev.hook = func(e objstore.Event) {
		ev.mu.Lock()
		sent := ev.sent
		ev.mu.Unlock()
		switch {
		case e.Kind == objstore.EventSent && sent > size:
			midOnce.Do(func() { close(midway) })
		case e.Kind == objstore.EventRetry:
			retryOnce.Do(func() { close(retried) })
		}
	}
	type result struct {
		rep objstore.Report
		err error
	}
	done := make(chan result, 1)
	go func() { // owned: the test waits for done
		rep, err := objstore.Publish(c, obs, dir, "db", "v1", objstore.PublishOptions{
			Parallel: 2, Retries: 50, Backoff: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
			Bandwidth: 8 << 20, JetStream: js, Observe: ev.observe,
		})
		done <- result{rep, err}
	}()
	for _, step := range []struct {
		what string
		ch   chan struct{}
	}{{"an upload under way", midway}, {"a failed attempt", retried}} {
		select {
		case <-step.ch:
		case r := <-done:
			t.Fatalf("Publish ended before %s: %+v, %v", step.what, r.rep, r.err)
		case <-c.Done():
			t.Fatalf("no %s", step.what)
		}
		if step.ch == midway {
			s.Shutdown()
			s.WaitForShutdown()
		}
	}
	natstest.RunServer(t, opts)
	r := <-done
	if r.err != nil {
		t.Fatalf("Publish across a server restart: %+v, %v", r.rep, r.err)
	}
	if r.rep.Uploaded+r.rep.Skipped != files || r.rep.Retries == 0 {
		t.Errorf("report %+v; want %d files and some retries", r.rep, files)
	}
	checkPublished(t, obs, dir, "db", "v1")
}

// TestPublishBandwidth: a limited publish takes at least the time the
// limit allows (less the limiter's initial burst of one chunk).
func TestPublishBandwidth(t *testing.T) {
	_, obs := startBucket(t)
	c := ctx(t)
	const files, size, bw = 3, 128 << 10, 512 << 10
	dir := writeFiles(t, files, size)
	start := time.Now()
	rep, err := objstore.Publish(c, obs, dir, "db", "v1", objstore.PublishOptions{Bandwidth: bw})
	took := time.Since(start)
	if err != nil || rep.Uploaded != files {
		t.Fatalf("Publish = %+v, %v", rep, err)
	}
	if least := time.Duration(float64(files*size-128<<10) / bw * float64(time.Second)); took < least {
		t.Errorf("publish of %d bytes at %d bytes/s took %v; want at least %v", files*size, bw, took, least)
	}
	checkPublished(t, obs, dir, "db", "v1")
}

// TestPublishInterrupted cancels a publish in the middle of an upload:
// the version stays invisible, and a rerun skips the files already
// uploaded. Then it changes a file of the complete version and cancels
// its republication: the version becomes invisible rather than showing
// old and new files together, until a rerun completes it.
func TestPublishInterrupted(t *testing.T) {
	js, obs := startBucket(t)
	const size = 256 << 10
	dir := writeFiles(t, 3, size)
	// interrupt publishes with Parallel 1 and cancels it once file has
	// started uploading.
	interrupt := func(file string) objstore.Report {
		t.Helper()
		c, cancel := context.WithCancel(ctx(t))
		defer cancel()
		var sent atomic.Int64
		rep, err := objstore.Publish(c, obs, dir, "db", "v1", objstore.PublishOptions{
			Parallel: 1, Bandwidth: 1 << 20,
			Observe: func(e objstore.Event) {
				if e.Kind == objstore.EventSent && e.File == file && sent.Add(e.Bytes) > 0 {
					cancel()
				}
			},
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("interrupted publish: %+v, %v; want context.Canceled", rep, err)
		}
		if visible(t, js, "db", "v1") {
			t.Fatal("an interrupted publish left the version visible")
		}
		return rep
	}
	rerun := func(wantUploaded, wantSkipped int) {
		t.Helper()
		rep, err := objstore.Publish(ctx(t), obs, dir, "db", "v1", objstore.PublishOptions{})
		if err != nil || rep.Uploaded != wantUploaded || rep.Skipped != wantSkipped {
			t.Fatalf("rerun = %+v, %v; want %d uploaded, %d skipped", rep, err, wantUploaded, wantSkipped)
		}
		checkPublished(t, obs, dir, "db", "v1")
		if !visible(t, js, "db", "v1") {
			t.Fatal("version not visible after a complete publish")
		}
	}

	if rep := interrupt("part-1"); rep.Uploaded != 1 {
		t.Fatalf("interrupted at part-1: %+v; want part-0 uploaded", rep)
	}
	rerun(2, 1)

	if err := os.WriteFile(filepath.Join(dir, "part-2"), bytes.Repeat([]byte("x"), size), 0o644); err != nil {
		t.Fatal(err)
	}
	if rep := interrupt("part-2"); rep.Skipped != 2 {
		t.Fatalf("interrupted at the changed part-2: %+v; want 2 skipped", rep)
	}
	rerun(1, 2)
}

// TestPublishLostChunks: an object whose metadata is stored but whose
// chunks are not (as an upload whose chunks the server rejected can leave)
// is skipped on its metadata alone, and uploaded again when Publish can
// count the chunks (PublishOptions.JetStream).
func TestPublishLostChunks(t *testing.T) {
	js, obs := startBucket(t)
	c := ctx(t)
	dir := writeFiles(t, 2, 200<<10)
	if _, err := objstore.Publish(c, obs, dir, "db", "v1", objstore.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	in, err := obs.GetInfo(c, objstore.ObjectName("db", "v1", "part-1"))
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(c, "OBJ_data")
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Purge(c, jetstream.WithPurgeSubject("$O.data.C."+in.NUID)); err != nil {
		t.Fatal(err)
	}
	rep, err := objstore.Publish(c, obs, dir, "db", "v1", objstore.PublishOptions{})
	if err != nil || rep.Skipped != 2 {
		t.Fatalf("without JetStream: %+v, %v; want both files skipped on their metadata", rep, err)
	}
	rep, err = objstore.Publish(c, obs, dir, "db", "v1", objstore.PublishOptions{JetStream: js})
	if err != nil || rep.Skipped != 1 || rep.Uploaded != 1 {
		t.Fatalf("with JetStream: %+v, %v; want part-1 uploaded again", rep, err)
	}
	checkPublished(t, obs, dir, "db", "v1")
}
