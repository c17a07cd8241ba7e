package objstore

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/time/rate"

	"github.com/spangledb/spangle/internal/backoff"
	"github.com/spangledb/spangle/node/source"
)

// PublishOptions configure Publish. The zero value uses every default.
type PublishOptions struct {
	// Parallel bounds the files uploaded at once. Default 4.
	Parallel int
	// Retries is how many times a file whose upload failed is uploaded
	// again before Publish gives up; negative means never. Failures of the
	// local file (it cannot be opened or read) and the end of Publish's
	// context are never retried. Default 5.
	Retries int
	// Backoff is the pause before a file's first retry; it doubles on each
	// retry of that file, up to BackoffMax, each pause drawn from its upper
	// half (jitter). Defaults 1s and 30s.
	Backoff    time.Duration
	BackoffMax time.Duration
	// Bandwidth bounds the bytes per second read from the files by all
	// uploads together (retries included; the local reads that compare
	// digests are not limited). Default 0: unlimited.
	Bandwidth int64
	// Progress, when set, is called after each file is uploaded or
	// skipped, from the uploading goroutines (serialised by Publish).
	Progress func(Report)
	// JetStream, when set, is the handle obs was bound through. Before
	// skipping a file, Publish then also checks that all the object's
	// chunks are in the bucket's stream. Without it a file is skipped on
	// the object's metadata alone, which can outlive its chunks: the
	// Object Store sends chunks without waiting for their
	// acknowledgements, so an upload whose chunks the server rejected (a
	// full bucket) can still store the metadata. Within one Publish, a
	// file whose upload failed is always uploaded again.
	JetStream jetstream.JetStream
	// Observe, when set, is told of finer-grained events (see Event), so
	// that a progress display can count bytes as they go. It is called
	// concurrently from the uploading goroutines, must be safe for
	// concurrent use and must not block.
	Observe func(Event)
}

// Defaults of PublishOptions.
const (
	DefaultPublishParallel   = 4
	DefaultPublishRetries    = 5
	DefaultPublishBackoff    = time.Second
	DefaultPublishBackoffMax = 30 * time.Second
)

// withDefaults returns o with its zero fields set to their defaults.
func (o PublishOptions) withDefaults() PublishOptions {
	if o.Parallel <= 0 {
		o.Parallel = DefaultPublishParallel
	}
	switch {
	case o.Retries == 0:
		o.Retries = DefaultPublishRetries
	case o.Retries < 0:
		o.Retries = 0
	}
	if o.Backoff <= 0 {
		o.Backoff = DefaultPublishBackoff
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = DefaultPublishBackoffMax
	}
	o.BackoffMax = max(o.BackoffMax, o.Backoff)
	return o
}

// Report counts a Publish's work so far.
type Report struct {
	Files         int   // data files in the directory
	Uploaded      int   // files uploaded
	Skipped       int   // files already in the bucket with the same size and digest
	Bytes         int64 // bytes of the data files
	BytesUploaded int64 // bytes of the files uploaded
	Retries       int   // failed upload attempts that were retried
}

// EventKind says what an Event reports.
type EventKind int

const (
	// EventStart: Publish has listed the directory: Files data files, Bytes
	// bytes. Sent once, before any other event.
	EventStart EventKind = iota + 1
	// EventSent: an upload read Bytes more bytes of File. A failed attempt
	// that is retried takes its bytes back with a negative Bytes, so the
	// sum over a Publish is the bytes of the files uploaded so far plus
	// those of the uploads under way.
	EventSent
	// EventSkipped: File (Bytes long) is already in the bucket with the
	// same digest and is not uploaded.
	EventSkipped
	// EventRetry: attempt Attempt (1 for the first) of File failed with
	// Err; it is tried again after Wait.
	EventRetry
)

// Event is one step of a Publish, given to PublishOptions.Observe.
type Event struct {
	Kind    EventKind
	File    string // the file's name in the directory, or "_SUCCESS"
	Files   int    // EventStart
	Bytes   int64
	Attempt int
	Wait    time.Duration
	Err     error
}

// CreateBucket binds bucket, creating it when missing with replicas
// copies (1 on a single server, 3 on a three-server cluster; 0 means 1).
func CreateBucket(ctx context.Context, js jetstream.JetStream, bucket string, replicas int) (jetstream.ObjectStore, error) {
	obs, err := js.ObjectStore(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		obs, err = js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: bucket, Replicas: max(replicas, 1)})
	}
	if err != nil {
		return nil, fmt.Errorf("objstore: bucket %s: %w", bucket, err)
	}
	return obs, nil
}

// Publish uploads the data files of dir (regular files not starting with
// "_" or ".") as version of db, at most opts.Parallel at once, skipping
// those already there with the same size and SHA-256 digest (and, with
// opts.JetStream, all their chunks), then writes _SUCCESS. It blocks until
// done, and returns what it did so far with any error; an error from the
// end of ctx wraps ctx.Err().
//
// A version is never visible half-written to nodes that require
// _SUCCESS: on error (ctx ended, retries spent, a local file unreadable)
// _SUCCESS is not written, and before it uploads a file over a version
// that is already complete, Publish deletes that version's _SUCCESS, so
// old and new files are never served together. A rerun uploads only what
// is missing or different.
//
// A failed upload is retried opts.Retries times with exponential backoff.
// Each attempt runs without ctx's deadline (ctx's end still stops it), so
// that the Object Store acknowledges each chunk within the JetStream
// handle's default timeout: a lost connection fails the attempt within
// that timeout instead of holding it until the deadline.
func Publish(ctx context.Context, obs jetstream.ObjectStore, dir, db, version string, opts PublishOptions) (Report, error) {
	if !source.ValidName(db) || !source.ValidName(version) {
		return Report{}, fmt.Errorf("objstore: publish: db %q and version %q must match ^[-_a-zA-Z0-9]+$", db, version)
	}
	opts = opts.withDefaults()
	files, err := listDir(dir)
	if err != nil {
		return Report{}, err
	}
	p := &publisher{obs: obs, dir: dir, db: db, version: version, opts: opts}
	p.rep.Files = len(files)
	for _, f := range files {
		p.rep.Bytes += f.size
	}
	if opts.Observe != nil {
		opts.Observe(Event{Kind: EventStart, Files: p.rep.Files, Bytes: p.rep.Bytes})
	}
	if opts.Bandwidth > 0 {
		p.limit = rate.NewLimiter(rate.Limit(opts.Bandwidth), limitBurst)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		firstErr error // guarded by p.mu
		next     atomic.Int64
		wg       sync.WaitGroup
	)
	for range min(opts.Parallel, len(files)) {
		wg.Add(1)
		go func() { // owned: Publish waits for it
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(files) || ctx.Err() != nil {
					return
				}
				if err := p.publishFile(ctx, files[i]); err != nil {
					p.mu.Lock()
					if firstErr == nil {
						firstErr = err
						cancel()
					}
					p.mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	p.mu.Lock()
	rep, err := p.rep, firstErr
	p.mu.Unlock()
	if err == nil && ctx.Err() != nil { // cancelled between files
		err = fmt.Errorf("objstore: publish: %w", ctx.Err())
	}
	if err != nil {
		return rep, err
	}
	err = p.retry(ctx, successFile, func(actx context.Context) error {
		if _, err := obs.PutBytes(actx, ObjectName(db, version, successFile), nil); err != nil {
			return fmt.Errorf("objstore: publish: write %s: %w", successFile, err)
		}
		return nil
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rep, err
}

// limitBurst is the bandwidth limiter's burst, and so the most bytes one
// read of a limited upload takes: the Object Store's default chunk, so
// that limiting does not split chunks.
const limitBurst = 128 << 10

// dirFile is a data file to publish.
type dirFile struct {
	name string
	size int64
}

// listDir lists dir's data files, sorted by name.
// versionMetaFiles are the files of a version that are not data but are
// published with it (blocks.BaseFileName, DeletesFileName, DigestFileName:
// a delta version's base and deleted keys, a version's digest).
var versionMetaFiles = map[string]bool{"_BASE": true, "_DELETES": true, "_DIGEST": true}

func listDir(dir string) ([]dirFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("objstore: publish: %w", err)
	}
	var files []dirFile
	for _, e := range entries {
		if !isDataFile(e.Name()) && !versionMetaFiles[e.Name()] {
			continue
		}
		fi, err := os.Stat(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("objstore: publish: %w", err)
		}
		if fi.Mode().IsRegular() {
			files = append(files, dirFile{e.Name(), fi.Size()})
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	return files, nil
}

// publisher is one Publish call's state.
type publisher struct {
	obs              jetstream.ObjectStore
	dir, db, version string
	opts             PublishOptions
	limit            *rate.Limiter // nil: unlimited

	unmarkMu sync.Mutex // guards unmarked; held while unmarking
	unmarked bool

	mu  sync.Mutex // guards rep, serialises opts.Progress
	rep Report
}

// publishFile uploads f (unless it is there already) with retries, and
// counts it.
func (p *publisher) publishFile(ctx context.Context, f dirFile) error {
	var uploaded, failed bool
	err := p.retry(ctx, f.name, func(actx context.Context) (err error) {
		uploaded, err = p.putFile(actx, f, !failed)
		failed = failed || err != nil
		return err
	})
	if err != nil {
		return err
	}
	if !uploaded && p.opts.Observe != nil {
		p.opts.Observe(Event{Kind: EventSkipped, File: f.name, Bytes: f.size})
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if uploaded {
		p.rep.Uploaded++
		p.rep.BytesUploaded += f.size
	} else {
		p.rep.Skipped++
	}
	if p.opts.Progress != nil {
		p.opts.Progress(p.rep)
	}
	return nil
}

// localError marks a failure of the local file: retrying cannot fix it.
type localError struct{ err error }

func (e *localError) Error() string { return e.err.Error() }
func (e *localError) Unwrap() error { return e.err }

// retry runs attempt until it succeeds, fails for good (a localError),
// ctx ends, or opts.Retries retries have failed, pausing with exponential
// backoff between attempts. Each attempt gets a context without ctx's
// deadline, cancelled when ctx ends (see Publish).
func (p *publisher) retry(ctx context.Context, file string, attempt func(context.Context) error) error {
	pause := backoff.New(p.opts.Backoff, p.opts.BackoffMax)
	for n := 1; ; n++ {
		actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		stop := context.AfterFunc(ctx, cancel)
		err := attempt(actx)
		stop()
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("objstore: publish %s: %w (%v)", file, ctx.Err(), err)
		}
		var local *localError
		if errors.As(err, &local) || n > p.opts.Retries {
			return err
		}
		p.mu.Lock()
		p.rep.Retries++
		p.mu.Unlock()
		wait := pause.Next()
		if p.opts.Observe != nil {
			p.opts.Observe(Event{Kind: EventRetry, File: file, Attempt: n, Wait: wait, Err: err})
		}
		if !backoff.Sleep(ctx, wait) {
			return fmt.Errorf("objstore: publish %s: %w (after %v)", file, ctx.Err(), err)
		}
	}
}

// putFile uploads f, unless trustExisting and its object exists with the
// same size and digest (and chunks, see PublishOptions.JetStream); it
// reports whether it uploaded. One attempt: no retries.
func (p *publisher) putFile(ctx context.Context, f dirFile, trustExisting bool) (bool, error) {
	path := filepath.Join(p.dir, f.name)
	name := ObjectName(p.db, p.version, f.name)
	if trustExisting {
		there, err := p.alreadyThere(ctx, path, name, f.size)
		if err != nil || there {
			return false, err
		}
	}
	if err := p.unmark(ctx); err != nil {
		return false, err
	}
	fh, err := os.Open(path)
	if err != nil {
		return false, &localError{fmt.Errorf("objstore: publish: %w", err)}
	}
	defer fh.Close()
	r := &uploadReader{ctx: ctx, r: fh, name: path, file: f.name, limit: p.limit, observe: p.opts.Observe}
	_, err = p.obs.Put(ctx, jetstream.ObjectMeta{Name: name}, r)
	if err != nil && p.opts.Observe != nil && r.n > 0 {
		p.opts.Observe(Event{Kind: EventSent, File: f.name, Bytes: -r.n})
	}
	switch {
	case r.err != nil:
		return false, r.err
	case err != nil:
		return false, fmt.Errorf("objstore: publish: put %s: %w", name, err)
	}
	return true, nil
}

// alreadyThere reports whether the object name holds the file at path
// (size bytes): same size, same digest, all its chunks stored.
func (p *publisher) alreadyThere(ctx context.Context, path, name string, size int64) (bool, error) {
	in, err := p.obs.GetInfo(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("objstore: publish: info %s: %w", name, err)
	}
	if in.Deleted || int64(in.Size) != size {
		return false, nil
	}
	digest, err := fileDigest(path)
	if err != nil || digest != in.Digest {
		return false, err
	}
	return p.chunksStored(ctx, in)
}

// chunksStored reports whether the bucket's stream holds every chunk of
// the object in; always true without opts.JetStream.
func (p *publisher) chunksStored(ctx context.Context, in *jetstream.ObjectInfo) (bool, error) {
	if p.opts.JetStream == nil || in.Chunks == 0 {
		return true, nil
	}
	stream, err := p.opts.JetStream.Stream(ctx, "OBJ_"+in.Bucket)
	if err != nil {
		return false, fmt.Errorf("objstore: publish: bucket %s's stream: %w", in.Bucket, err)
	}
	subject := "$O." + in.Bucket + ".C." + in.NUID
	si, err := stream.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return false, fmt.Errorf("objstore: publish: chunks of %s: %w", in.Name, err)
	}
	return si.State.Subjects[subject] == uint64(in.Chunks), nil
}

// unmark deletes the version's _SUCCESS, once per Publish, before the
// first file is uploaded: a version that was complete is not complete
// while its files change.
func (p *publisher) unmark(ctx context.Context) error {
	p.unmarkMu.Lock()
	defer p.unmarkMu.Unlock()
	if p.unmarked {
		return nil
	}
	err := p.obs.Delete(ctx, ObjectName(p.db, p.version, successFile))
	if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("objstore: publish: delete the old %s: %w", successFile, err)
	}
	p.unmarked = true
	return nil
}

// uploadReader reads a file for Put: it waits for the bandwidth limiter,
// reports the bytes read, and keeps the file's own read error apart from
// the Object Store's, so that retry does not retry it.
type uploadReader struct {
	ctx     context.Context
	r       io.Reader
	name    string // path, for errors
	file    string // name in the directory, for events
	limit   *rate.Limiter
	observe func(Event)
	n       int64 // bytes read
	err     error // the local read error, if any
}

func (u *uploadReader) Read(b []byte) (int, error) {
	if u.limit != nil && len(b) > limitBurst {
		b = b[:limitBurst]
	}
	n, err := u.r.Read(b)
	if err != nil && err != io.EOF {
		u.err = &localError{fmt.Errorf("objstore: publish: read %s: %w", u.name, err)}
		return n, u.err
	}
	if n > 0 {
		if u.limit != nil {
			if werr := u.limit.WaitN(u.ctx, n); werr != nil {
				return 0, werr
			}
		}
		u.n += int64(n)
		if u.observe != nil {
			u.observe(Event{Kind: EventSent, File: u.file, Bytes: int64(n)})
		}
	}
	return n, err
}

// fileDigest returns the file's digest as the Object Store writes it
// ("SHA-256=<base64url>").
func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", &localError{fmt.Errorf("objstore: publish: %w", err)}
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", &localError{fmt.Errorf("objstore: publish: digest %s: %w", path, err)}
	}
	return jetstream.GetObjectDigestValue(h), nil
}

// DeleteVersion removes every object of version of db (_SUCCESS first, so
// nodes stop seeing the version before its files go) and returns how many
// it removed. It finds them from the subjects of the bucket's metadata
// (a stream info request) rather than a listing, which takes a consumer:
// a publisher's NATS account may not create any (docs/SECURITY.md).
func DeleteVersion(ctx context.Context, js jetstream.JetStream, obs jetstream.ObjectStore, db, version string) (int, error) {
	infos, err := objectInfos(ctx, js, obs)
	if err != nil {
		return 0, fmt.Errorf("objstore: delete: list: %w", err)
	}
	prefix := db + "/" + version + "/"
	var names []string
	for _, in := range infos {
		if len(in.Name) > len(prefix) && in.Name[:len(prefix)] == prefix {
			names = append(names, in.Name)
		}
	}
	sort.Slice(names, func(i, j int) bool { // _SUCCESS first
		return (names[i] == prefix+successFile) || (names[j] != prefix+successFile && names[i] < names[j])
	})
	for i, name := range names {
		if err := obs.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			return i, fmt.Errorf("objstore: delete %s: %w", name, err)
		}
	}
	return len(names), nil
}

// objectInfos returns the information of every object of obs that is
// not deleted, from the metadata subjects of its stream.
func objectInfos(ctx context.Context, js jetstream.JetStream, obs jetstream.ObjectStore) ([]*jetstream.ObjectInfo, error) {
	st, err := obs.Status(ctx)
	if err != nil {
		return nil, err
	}
	stream, err := js.Stream(ctx, "OBJ_"+st.Bucket())
	if err != nil {
		return nil, err
	}
	pre := "$O." + st.Bucket() + ".M."
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(pre+">"))
	if err != nil {
		return nil, err
	}
	var out []*jetstream.ObjectInfo
	for subject := range info.State.Subjects {
		name, err := base64.URLEncoding.DecodeString(strings.TrimPrefix(subject, pre))
		if err != nil {
			continue
		}
		in, err := obs.GetInfo(ctx, string(name))
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	return out, nil
}
