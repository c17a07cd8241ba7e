package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"

	"github.com/spangledb/spangle/node/source"
)

// Scheme is the URL scheme of the S3 source.
const Scheme = "s3"

// Marker files of a version directory.
const (
	successFile = "_SUCCESS"
	symlinkFile = "_SYMLINK"
)

// IsURL reports whether s names an S3 source (its scheme is s3).
func IsURL(s string) bool { return strings.HasPrefix(s, Scheme+"://") }

// ParseURL splits a source URL s3://<bucket>[/<prefix>] into the bucket
// and the prefix, "" or ending in "/" ("s3://b/x/y" → "b", "x/y/").
func ParseURL(s string) (bucket, prefix string, err error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != Scheme || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", "", fmt.Errorf("%w: %q: want %s://<bucket>[/<prefix>]", ErrURL, s, Scheme)
	}
	if err := s3utils.CheckValidBucketNameStrict(u.Host); err != nil {
		return "", "", fmt.Errorf("%w: %q: bucket %q: %v", ErrURL, s, u.Host, err)
	}
	prefix, err = cleanPrefix(u.Path)
	if err != nil {
		return "", "", fmt.Errorf("%w: %q: %v", ErrURL, s, err)
	}
	return u.Host, prefix, nil
}

// cleanPrefix returns p without leading and with one trailing "/", or ""
// for the bucket's root.
func cleanPrefix(p string) (string, error) {
	p = strings.TrimSuffix(strings.TrimPrefix(p, "/"), "/")
	if p == "" {
		return "", nil
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", fmt.Errorf("prefix %q has an empty, . or .. segment", p)
		}
	}
	return p + "/", nil
}

// Source is a source.Source and source.RangeSource over a bucket and prefix of
// an S3-compatible server. It is safe for concurrent use. It holds no
// goroutine and nothing to close: idle connections belong to the
// transport.
type Source struct {
	cfg    Config
	bucket string
	prefix string // "" or ending in "/"
	client *minio.Client
	core   minio.Core // the same client, for GetObject without lazy reads

	mu sync.Mutex // guards marks and targets
	// marks holds the final marker state of versions ("<db>/<version>"):
	// complete (_SUCCESS) or symlinked. Versions are immutable, so these
	// never change; other states are read again on every listing.
	marks map[string]marks
	// targets maps a version ("<db>/<version>") to the version whose files
	// it serves (itself, or its _SYMLINK's target), as ListFiles resolved it.
	targets map[string]string
}

var (
	_ source.Source      = (*Source)(nil)
	_ source.RangeSource = (*Source)(nil)
)

// New returns the source of bucket under prefix (as ParseURL returns them).
// It connects to nothing; credentials are looked for on the first request.
// cfg must pass Validate: start from DefaultConfig.
func New(bucket, prefix string, cfg Config) (*Source, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := s3utils.CheckValidBucketNameStrict(bucket); err != nil {
		return nil, fmt.Errorf("%w: bucket %q: %v", ErrURL, bucket, err)
	}
	prefix, err := cleanPrefix(prefix)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrURL, err)
	}
	host, secure, err := cfg.endpoint()
	if err != nil {
		return nil, err
	}
	lookup := minio.BucketLookupAuto
	if cfg.PathStyle {
		lookup = minio.BucketLookupPath
	}
	client, err := minio.New(host, &minio.Options{
		Creds:        credentialChain(cfg),
		Secure:       secure,
		Transport:    cfg.Transport,
		Region:       cfg.Region,
		BucketLookup: lookup,
		MaxRetries:   cfg.Attempts,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: s3.endpoint %q: %v", ErrConfig, cfg.Endpoint, err)
	}
	return &Source{
		cfg: cfg, bucket: bucket, prefix: prefix, client: client, core: minio.Core{Client: client},
		marks: map[string]marks{}, targets: map[string]string{},
	}, nil
}

// credentialChain returns the static keys of cfg if set, else the chain:
// environment (AWS, then MinIO names), shared AWS files, IAM.
func credentialChain(cfg Config) *credentials.Credentials {
	if cfg.AccessKeyID != "" {
		return credentials.NewStaticV4(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken)
	}
	return credentials.NewChainCredentials([]credentials.Provider{
		&credentials.EnvAWS{},
		&credentials.EnvMinio{},
		&credentials.FileAWSCredentials{},
		&credentials.IAM{},
	})
}

// String returns s3://<bucket>[/<prefix>].
func (s *Source) String() string {
	if s.prefix == "" {
		return Scheme + "://" + s.bucket
	}
	return Scheme + "://" + s.bucket + "/" + strings.TrimSuffix(s.prefix, "/")
}

// Path returns s3://<bucket>/<prefix>/<db>/<version>.
func (s *Source) Path(db, version string) string {
	return Scheme + "://" + s.bucket + "/" + s.prefix + db + "/" + version
}

// dir returns the key prefix of a directory under the source's prefix.
func (s *Source) dir(parts ...string) string {
	return s.prefix + strings.Join(parts, "/") + "/"
}

// listing bounds ctx by ListTimeout for one listing call.
func (s *Source) listing(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.ListTimeout)
}

// listOptions lists one level under prefix, ListPageSize keys a page.
func (s *Source) listOptions(prefix string) minio.ListObjectsOptions {
	fetchOwner := false
	return minio.ListObjectsOptions{Prefix: prefix, MaxKeys: s.cfg.ListPageSize, FetchOwner: &fetchOwner}
}

// object is a listed object directly in a directory.
type object struct {
	name    string // without the directory
	size    int64
	modTime time.Time
}

// listDir lists the direct children of dir (a key prefix ending in "/"),
// page by page: objects, and sub-directories by name, both sorted.
func (s *Source) listDir(ctx context.Context, dir string) (objs []object, dirs []string, err error) {
	seen := map[string]bool{} // a server may repeat a common prefix across pages
	for o := range s.client.ListObjectsIter(ctx, s.bucket, s.listOptions(dir)) {
		if o.Err != nil {
			return nil, nil, fmt.Errorf("s3: list s3://%s/%s: %w", s.bucket, dir, classify(o.Err))
		}
		rel, ok := strings.CutPrefix(o.Key, dir)
		switch {
		case !ok || rel == "": // the directory's own marker object
		case strings.HasSuffix(rel, "/"):
			name := strings.TrimSuffix(rel, "/")
			if !seen[name] {
				seen[name] = true
				dirs = append(dirs, name)
			}
		default:
			objs = append(objs, object{name: rel, size: o.Size, modTime: o.LastModified})
		}
	}
	if err := ctx.Err(); err != nil { // the iterator stops silently on a cancelled context
		return nil, nil, fmt.Errorf("s3: list s3://%s/%s: %w", s.bucket, dir, err)
	}
	sort.Strings(dirs)
	sort.Slice(objs, func(i, j int) bool { return objs[i].name < objs[j].name })
	return objs, dirs, nil
}

// validNames keeps the names valid as db or version names.
func validNames(names []string) []string {
	valid := names[:0]
	for _, n := range names {
		if source.ValidName(n) {
			valid = append(valid, n)
		}
	}
	return valid
}

// ListDBs lists the valid db names under the prefix, sorted.
func (s *Source) ListDBs(ctx context.Context) ([]string, error) {
	ctx, cancel := s.listing(ctx)
	defer cancel()
	_, dirs, err := s.listDir(ctx, s.prefix)
	if err != nil {
		return nil, err
	}
	dbs := validNames(dirs)
	s.forget(dbs, "", nil)
	return dbs, nil
}

// ListVersions lists db's valid version names, byte-wise; with
// requireSuccess only the complete ones: those holding _SUCCESS, and
// symlinks whose target holds it. A symlink that cannot be followed is
// listed, so that building it fails with the reason.
func (s *Source) ListVersions(ctx context.Context, db string, requireSuccess bool) ([]string, error) {
	ctx, cancel := s.listing(ctx)
	defer cancel()
	_, dirs, err := s.listDir(ctx, s.dir(db))
	if err != nil {
		return nil, err
	}
	versions := validNames(dirs)
	s.forget(nil, db, versions)
	if !requireSuccess {
		return versions, nil
	}
	return s.complete(ctx, db, versions)
}

// ListFiles lists the version's data files with their sizes, sorted by
// name: those of its _SYMLINK's target if it has one.
func (s *Source) ListFiles(ctx context.Context, db, version string) ([]source.SourceFile, error) {
	ctx, cancel := s.listing(ctx)
	defer cancel()
	objs, dirs, err := s.listDir(ctx, s.dir(db, version))
	if err != nil {
		return nil, err
	}
	if len(objs) == 0 && len(dirs) == 0 {
		// Gone since it was listed, or never there: not an empty version.
		return nil, fmt.Errorf("s3: %s: no such version: %w", s.Path(db, version), source.ErrPermanent)
	}
	target := version
	if hasObject(objs, symlinkFile) {
		if target, err = s.follow(ctx, db, version); err != nil {
			return nil, err
		}
		if objs, dirs, err = s.listDir(ctx, s.dir(db, target)); err != nil {
			return nil, err
		}
		if len(objs) == 0 && len(dirs) == 0 {
			return nil, s.symlinkError(db, version, "its target %s does not exist", target)
		}
		if hasObject(objs, symlinkFile) {
			return nil, s.symlinkError(db, version, "its target %s is a symlink too (chains are not followed)", target)
		}
	}
	s.mu.Lock()
	s.targets[db+"/"+version] = target
	s.mu.Unlock()
	var files []source.SourceFile
	for _, o := range objs {
		if isDataFile(o.name) {
			files = append(files, source.SourceFile{Name: o.name, Size: o.size, ModTime: o.modTime})
		}
	}
	return files, nil
}

// Open streams one data file of the version (of its _SYMLINK's target).
func (s *Source) Open(ctx context.Context, db, version, file string) (io.ReadCloser, error) {
	return s.OpenAt(ctx, db, version, file, 0)
}

// OpenAt streams one data file from offset, with an HTTP Range request.
// Nothing is copied locally. A stall longer than Config.IdleTimeout, in
// the response or the body, fails with a retryable error.
func (s *Source) OpenAt(ctx context.Context, db, version, file string, offset int64) (io.ReadCloser, error) {
	if offset < 0 {
		return nil, fmt.Errorf("s3: open %s/%s/%s at %d: %w", db, version, file, offset, source.ErrPermanent)
	}
	target, err := s.target(ctx, db, version)
	if err != nil {
		return nil, err
	}
	key := s.prefix + db + "/" + target + "/" + file
	var opts minio.GetObjectOptions
	if offset > 0 {
		if err := opts.SetRange(offset, 0); err != nil {
			return nil, fmt.Errorf("s3: open s3://%s/%s at byte %d: %w", s.bucket, key, offset, permanentError{err})
		}
	}
	where := "s3://" + s.bucket + "/" + key
	if offset > 0 {
		where += fmt.Sprintf(" at byte %d", offset)
	}
	body, err := s.get(ctx, key, opts)
	var resp minio.ErrorResponse
	if offset > 0 && errors.As(err, &resp) && resp.Code == minio.InvalidRange {
		// Range starts at the end: nothing left, if offset is the size.
		info, serr := s.client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
		if serr == nil && info.Size == offset {
			return io.NopCloser(strings.NewReader("")), nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("s3: open %s: %w", where, classify(err))
	}
	return body, nil
}

// target returns the version whose files version serves: as ListFiles
// resolved it, else resolved now.
func (s *Source) target(ctx context.Context, db, version string) (string, error) {
	s.mu.Lock()
	t, ok := s.targets[db+"/"+version]
	s.mu.Unlock()
	if ok {
		return t, nil
	}
	ctx, cancel := s.listing(ctx)
	defer cancel()
	m, err := s.readMarks(ctx, db, version)
	if err != nil {
		return "", err
	}
	if !m.symlink {
		return version, nil
	}
	return s.follow(ctx, db, version)
}

// forget drops remembered state of dbs not in dbs (when db is ""), or of
// db's versions not in versions: names gone from the source.
func (s *Source) forget(dbs []string, db string, versions []string) {
	keep := map[string]bool{}
	for _, n := range dbs {
		keep[n] = true
	}
	for _, v := range versions {
		keep[v] = true
	}
	gone := func(key string) bool {
		d, v, _ := strings.Cut(key, "/")
		if db == "" {
			return !keep[d]
		}
		return d == db && !keep[v]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.marks {
		if gone(k) {
			delete(s.marks, k)
		}
	}
	for k := range s.targets {
		if gone(k) {
			delete(s.targets, k)
		}
	}
}

func hasObject(objs []object, name string) bool {
	i := sort.Search(len(objs), func(i int) bool { return objs[i].name >= name })
	return i < len(objs) && objs[i].name == name
}

// isDataFile is node's rule for the files of a version: not starting with
// "_" or ".".
func isDataFile(name string) bool {
	return name != "" && !strings.HasPrefix(name, "_") && !strings.HasPrefix(name, ".")
}
