package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/minio/minio-go/v7"
	"golang.org/x/sync/errgroup"

	"github.com/spangledb/spangle/node/source"
)

// maxSymlinkSize bounds the bytes read of a _SYMLINK object: it holds a
// version name.
const maxSymlinkSize = 1 << 10

// markerReads is how many versions' markers ListVersions reads at once.
const markerReads = 8

// marks are the marker files of a version directory.
type marks struct {
	success bool   // _SUCCESS exists
	symlink bool   // _SYMLINK exists
	target  string // _SYMLINK's content, whitespace-trimmed
}

// final reports whether m can no longer change: versions are immutable
// once complete, and a symlink is written once.
func (m marks) final() bool { return m.success || m.symlink }

// readMarks returns the markers of a version: remembered if final, else
// read with one list request for the keys starting with "_" (plus a GET of
// _SYMLINK when there is one). A version that does not exist has none.
// When the _SYMLINK cannot be read, the error comes with marks saying
// there is one.
func (s *Source) readMarks(ctx context.Context, db, version string) (marks, error) {
	id := db + "/" + version
	s.mu.Lock()
	m, ok := s.marks[id]
	s.mu.Unlock()
	if ok {
		return m, nil
	}
	dir := s.dir(db, version)
	for o := range s.client.ListObjectsIter(ctx, s.bucket, s.listOptions(dir+"_")) {
		if o.Err != nil {
			return marks{}, fmt.Errorf("s3: list s3://%s/%s_*: %w", s.bucket, dir, classify(o.Err))
		}
		switch o.Key {
		case dir + successFile:
			m.success = true
		case dir + symlinkFile:
			m.symlink = true
		}
	}
	if err := ctx.Err(); err != nil {
		return marks{}, fmt.Errorf("s3: list s3://%s/%s_*: %w", s.bucket, dir, err)
	}
	if m.symlink {
		t, err := s.readSymlink(ctx, dir+symlinkFile)
		if err != nil {
			return marks{symlink: true}, err
		}
		m.target = t
	}
	if m.final() {
		s.mu.Lock()
		s.marks[id] = m
		s.mu.Unlock()
	}
	return m, nil
}

// readSymlink returns the trimmed content of a _SYMLINK object.
func (s *Source) readSymlink(ctx context.Context, key string) (string, error) {
	body, err := s.get(ctx, key, minio.GetObjectOptions{})
	if err != nil {
		return "", fmt.Errorf("s3: read s3://%s/%s: %w", s.bucket, key, classify(err))
	}
	defer body.Close()
	b, err := io.ReadAll(io.LimitReader(body, maxSymlinkSize+1))
	if err != nil {
		return "", fmt.Errorf("s3: read s3://%s/%s: %w", s.bucket, key, err)
	}
	if len(b) > maxSymlinkSize {
		return "", permanentError{fmt.Errorf("%w: s3://%s/%s is over %d bytes; it should hold a version name", ErrSymlink, s.bucket, key, maxSymlinkSize)}
	}
	return strings.TrimSpace(string(b)), nil
}

// follow returns the target of a symlinked version, checked: a valid
// version name, not the version itself, not a symlink. (Whether the target
// exists, ListFiles checks.)
func (s *Source) follow(ctx context.Context, db, version string) (string, error) {
	m, err := s.readMarks(ctx, db, version)
	if err != nil {
		return "", err
	}
	switch t := m.target; {
	case !m.symlink:
		return version, nil
	case t == "":
		return "", s.symlinkError(db, version, "it is empty")
	case !source.ValidName(t):
		return "", s.symlinkError(db, version, "it names %q, not a valid version name", t)
	case t == version:
		return "", s.symlinkError(db, version, "it names its own version")
	}
	tm, err := s.readMarks(ctx, db, m.target)
	if err != nil {
		return "", err
	}
	if tm.symlink {
		return "", s.symlinkError(db, version, "its target %s is a symlink too (chains are not followed)", m.target)
	}
	return m.target, nil
}

// symlinkError is a permanent ErrSymlink naming the version's _SYMLINK.
func (s *Source) symlinkError(db, version, format string, args ...any) error {
	return permanentError{fmt.Errorf("%w: %s/%s: %s", ErrSymlink, s.Path(db, version), symlinkFile, fmt.Sprintf(format, args...))}
}

// complete keeps the complete versions, in order: those holding _SUCCESS,
// symlinks whose target holds it, and symlinks that cannot be followed
// (so that building them reports why). It reads up to markerReads
// versions' markers at once; an error that is not permanent fails it.
func (s *Source) complete(ctx context.Context, db string, versions []string) ([]string, error) {
	keep := make([]bool, len(versions))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(markerReads)
	for i, v := range versions {
		g.Go(func() error {
			m, err := s.readMarks(gctx, db, v)
			if err == nil && m.symlink {
				var t string
				if t, err = s.follow(gctx, db, v); err == nil {
					m, err = s.readMarks(gctx, db, t) // m: the target's
				}
			}
			switch {
			case err == nil:
				keep[i] = m.success
			case m.symlink && errors.Is(err, source.ErrPermanent):
				keep[i] = true // a broken symlink: building it fails with err
			default:
				return err
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	done := versions[:0:0]
	for i, v := range versions {
		if keep[i] {
			done = append(done, v)
		}
	}
	return done, nil
}
