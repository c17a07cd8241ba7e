package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// fileSource is a Source on a local directory.
type fileSource struct {
	root           string // absolute
	followExternal bool   // follow symlinks that leave root
}

func newFileSource(root string, followExternal bool) (*fileSource, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("source: source %q: %w", root, err)
	}
	return &fileSource{root: abs, followExternal: followExternal}, nil
}

func (s *fileSource) String() string { return s.root }

func (s *fileSource) Path(db, version string) string { return filepath.Join(s.root, db, version) }

// subdirs lists the valid names of directories in dir, sorted byte-wise.
func subdirs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if !ValidName(e.Name()) {
			continue
		}
		if e.IsDir() {
			names = append(names, e.Name())
			continue
		}
		if e.Type()&os.ModeSymlink != 0 { // follow links to directories
			if fi, err := os.Stat(filepath.Join(dir, e.Name())); err == nil && fi.IsDir() {
				names = append(names, e.Name())
			}
		}
	}
	sort.Strings(names)
	return names, nil
}

func (s *fileSource) ListDBs(ctx context.Context) ([]string, error) {
	dbs, err := subdirs(s.root)
	if err != nil {
		return nil, fmt.Errorf("source: list dbs in %s: %w", s.root, err)
	}
	return dbs, nil
}

func (s *fileSource) ListVersions(ctx context.Context, db string, requireSuccess bool) ([]string, error) {
	dir := filepath.Join(s.root, db)
	versions, err := subdirs(dir)
	if err != nil {
		return nil, fmt.Errorf("source: list versions in %s: %w", dir, err)
	}
	if !requireSuccess {
		return versions, nil
	}
	complete := versions[:0]
	for _, v := range versions {
		if _, err := os.Stat(filepath.Join(dir, v, "_SUCCESS")); err == nil {
			complete = append(complete, v)
		}
	}
	return complete, nil
}

// ListFiles lists a version's data files. Every data entry (names not
// starting with "_" or ".") must be a readable regular file, after
// following symlinks: a directory, a FIFO, a socket, a device or a
// dangling symlink fails the listing (ErrNotRegular), so that a version is
// never built from some of its files. Symlinks, and the version directory
// itself, must resolve inside the source root unless the source was
// opened with FollowExternalSymlinks (ErrSymlinkOutside).
func (s *fileSource) ListFiles(ctx context.Context, db, version string) ([]SourceFile, error) {
	dir := filepath.Join(s.root, db, version)
	if err := s.inside(dir); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("source: list files in %s: %w", dir, err)
	}
	var files []SourceFile
	for _, e := range entries {
		if !IsDataFile(e.Name()) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if e.Type()&os.ModeSymlink != 0 {
			if err := s.inside(path); err != nil {
				return nil, err
			}
		}
		fi, err := os.Stat(path) // follows links
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s: a dangling symlink", ErrNotRegular, path)
		}
		if err != nil {
			return nil, fmt.Errorf("source: stat %s: %w", path, err)
		}
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("%w: %s is a %s", ErrNotRegular, path, fileKind(fi.Mode()))
		}
		files = append(files, SourceFile{Name: e.Name(), Size: fi.Size(), ModTime: fi.ModTime()})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	return files, nil
}

// inside checks that path, its symlinks resolved, lies within the source
// root (itself resolved), unless external symlinks are allowed.
func (s *fileSource) inside(path string) error {
	if s.followExternal {
		return nil
	}
	real, err := filepath.EvalSymlinks(path)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %s: a dangling symlink", ErrNotRegular, path)
	}
	if err != nil {
		return fmt.Errorf("source: resolve %s: %w", path, err)
	}
	root, err := filepath.EvalSymlinks(s.root)
	if err != nil {
		return fmt.Errorf("source: resolve source root %s: %w", s.root, err)
	}
	if rel, err := filepath.Rel(root, real); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("%w: %s resolves to %s (set allow_external_symlinks to follow it)", ErrSymlinkOutside, path, real)
	}
	return nil
}

// fileKind names a non-regular file's type for an error.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&os.ModeNamedPipe != 0:
		return "FIFO"
	case m&os.ModeSocket != 0:
		return "socket"
	case m&os.ModeDevice != 0:
		return "device"
	}
	return "non-regular file (" + m.Type().String() + ")"
}

func (s *fileSource) Open(ctx context.Context, db, version, file string) (io.ReadCloser, error) {
	return s.OpenAt(ctx, db, version, file, 0)
}

var _ RangeSource = (*fileSource)(nil)

// OpenAt opens a file for reading from offset: a download resumes there.
// Only a regular file is opened: a FIFO put in its place since the
// listing would block the open.
func (s *fileSource) OpenAt(ctx context.Context, db, version, file string, offset int64) (io.ReadCloser, error) {
	path := filepath.Join(s.root, db, version, file)
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is a %s", ErrNotRegular, path, fileKind(fi.Mode()))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("source: open source file: %w", err)
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("source: seek source file: %w", err)
	}
	return f, nil
}
