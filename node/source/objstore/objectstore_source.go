package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"sort"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/internal/promreg"
	"github.com/spangledb/spangle/node/source"
)

// Scheme is the URL scheme of the Object Store source.
const Scheme = "nats-object"

// successFile marks a version as complete.
const successFile = "_SUCCESS"

// ParseURL returns the bucket of a source URL nats-object://<bucket>.
func ParseURL(s string) (bucket string, err error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != Scheme {
		return "", fmt.Errorf("%w: %q: want %s://<bucket>", ErrURL, s, Scheme)
	}
	if !source.ValidName(u.Host) || (u.Path != "" && u.Path != "/") {
		return "", fmt.Errorf("%w: %q: want %s://<bucket>, bucket matching ^[-_a-zA-Z0-9]+$", ErrURL, s, Scheme)
	}
	return u.Host, nil
}

// IsURL reports whether s names an Object Store source (its scheme is
// nats-object).
func IsURL(s string) bool { return strings.HasPrefix(s, Scheme+"://") }

// JetStreamFunc returns the JetStream handle to use. It may block until the
// connection is up, and must return when ctx ends.
type JetStreamFunc func(ctx context.Context) (jetstream.JetStream, error)

// Source is a source.Source over an Object Store bucket. It is safe for
// concurrent use. A bucket that does not exist yet lists as empty.
type Source struct {
	bucket string
	js     JetStreamFunc

	mu  sync.Mutex // guards obs
	obs jetstream.ObjectStore

	// listMu serialises the listings of the bucket and guards last: the
	// objects of the last listing, reused while the bucket's stream is
	// unchanged (listing.go).
	listMu sync.Mutex
	last   listing

	// listings counts the calls of list by result: "listed" (the bucket
	// was listed) or "reused" (the last listing was). Register exports it.
	listings *prometheus.CounterVec
}

var _ source.Source = (*Source)(nil)

// New returns the source of bucket; js supplies the connection when the
// source is first used. It connects to nothing.
func New(bucket string, js JetStreamFunc) (*Source, error) {
	if !source.ValidName(bucket) {
		return nil, fmt.Errorf("%w: bucket %q", ErrURL, bucket)
	}
	if js == nil {
		panic("objstore: New with a nil JetStreamFunc")
	}
	return &Source{bucket: bucket, js: js, listings: newListingsCounter()}, nil
}

func newListingsCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "spangle_objstore_listings_total",
		Help: "Listings of the Object Store source's bucket asked for, by result: listed (the whole bucket was listed) or reused (its stream had not changed since the last listing, whose objects served).",
	}, []string{"result"})
}

// Register exports the source's metrics on reg; call it before the source
// is used. A source registered on a registry that holds them already
// shares that one's counters.
func (s *Source) Register(reg prometheus.Registerer) error {
	c, err := promreg.Register(reg, s.listings)
	if err != nil {
		return fmt.Errorf("objstore: metrics: %w", err)
	}
	s.listings = c
	return nil
}

// String returns nats-object://<bucket>.
func (s *Source) String() string { return Scheme + "://" + s.bucket }

// Path returns nats-object://<bucket>/<db>/<version>.
func (s *Source) Path(db, version string) string { return s.String() + "/" + db + "/" + version }

// store binds the bucket once; ok is false while it does not exist.
func (s *Source) store(ctx context.Context) (obs jetstream.ObjectStore, ok bool, err error) {
	s.mu.Lock()
	obs = s.obs
	s.mu.Unlock()
	if obs != nil {
		return obs, true, nil
	}
	js, err := s.js(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("objstore: %s: connect: %w", s, err)
	}
	obs, err = js.ObjectStore(ctx, s.bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("objstore: %s: bind bucket: %w", s, err)
	}
	s.mu.Lock()
	s.obs = obs
	s.mu.Unlock()
	return obs, true, nil
}

// ListDBs lists the valid db names in the bucket, sorted.
func (s *Source) ListDBs(ctx context.Context) ([]string, error) {
	objs, err := s.list(ctx)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, o := range objs {
		set[o.db] = true
	}
	return sortedKeys(set), nil
}

// ListVersions lists db's valid version names, byte-wise; with
// requireSuccess only those holding _SUCCESS.
func (s *Source) ListVersions(ctx context.Context, db string, requireSuccess bool) ([]string, error) {
	objs, err := s.list(ctx)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, o := range objs {
		if o.db != db {
			continue
		}
		set[o.version] = set[o.version] || o.file == successFile || !requireSuccess
	}
	for v, ok := range set {
		if !ok {
			delete(set, v)
		}
	}
	return sortedKeys(set), nil
}

// ListFiles lists the version's data files with their sizes, sorted by name.
func (s *Source) ListFiles(ctx context.Context, db, version string) ([]source.SourceFile, error) {
	objs, err := s.list(ctx)
	if err != nil {
		return nil, err
	}
	var files []source.SourceFile
	for _, o := range objs {
		if o.db == db && o.version == version && isDataFile(o.file) {
			files = append(files, source.SourceFile{Name: o.file, Size: o.size, ModTime: o.modTime})
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	return files, nil
}

// Open streams one object; nothing is copied locally. The reader checks
// the object's digest at its end.
func (s *Source) Open(ctx context.Context, db, version, file string) (io.ReadCloser, error) {
	obs, ok, err := s.store(ctx)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("objstore: %s: open %s/%s/%s: %w", s, db, version, file, jetstream.ErrBucketNotFound)
	}
	r, err := obs.Get(ctx, ObjectName(db, version, file))
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		// fs.ErrNotExist as for the other sources: a delta's optional
		// files (_BASE, _DIGEST) are told absent by it.
		return nil, fmt.Errorf("objstore: %s: open %s/%s/%s: %w (%w)", s, db, version, file, err, fs.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("objstore: %s: open %s/%s/%s: %w", s, db, version, file, err)
	}
	return r, nil
}

// ObjectName returns the object name of a version's file.
func ObjectName(db, version, file string) string { return db + "/" + version + "/" + file }

// isDataFile is node's rule for the files of a version: not starting with
// "_" or ".".
func isDataFile(name string) bool {
	return name != "" && !strings.HasPrefix(name, "_") && !strings.HasPrefix(name, ".")
}

func sortedKeys(set map[string]bool) []string {
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
