package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// fileSource is a Source on a local directory.
type fileSource struct {
	root string // absolute
}

func newFileSource(root string) (*fileSource, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("node: source %q: %w", root, err)
	}
	return &fileSource{root: abs}, nil
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
		return nil, fmt.Errorf("node: list dbs in %s: %w", s.root, err)
	}
	return dbs, nil
}

func (s *fileSource) ListVersions(ctx context.Context, db string, requireSuccess bool) ([]string, error) {
	dir := filepath.Join(s.root, db)
	versions, err := subdirs(dir)
	if err != nil {
		return nil, fmt.Errorf("node: list versions in %s: %w", dir, err)
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

func (s *fileSource) ListFiles(ctx context.Context, db, version string) ([]SourceFile, error) {
	dir := filepath.Join(s.root, db, version)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("node: list files in %s: %w", dir, err)
	}
	var files []SourceFile
	for _, e := range entries {
		if !isDataFile(e.Name()) {
			continue
		}
		fi, err := os.Stat(filepath.Join(dir, e.Name())) // follows links
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("node: stat %s: %w", filepath.Join(dir, e.Name()), err)
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		files = append(files, SourceFile{Name: e.Name(), Size: fi.Size()})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	return files, nil
}

func (s *fileSource) Open(ctx context.Context, db, version, file string) (io.ReadCloser, error) {
	f, err := os.Open(filepath.Join(s.root, db, version, file))
	if err != nil {
		return nil, fmt.Errorf("node: open source file: %w", err)
	}
	return f, nil
}

var _ RangeSource = (*fileSource)(nil)

// OpenAt opens a file for reading from offset: a download resumes there.
func (s *fileSource) OpenAt(ctx context.Context, db, version, file string, offset int64) (io.ReadCloser, error) {
	f, err := os.Open(filepath.Join(s.root, db, version, file))
	if err != nil {
		return nil, fmt.Errorf("node: open source file: %w", err)
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("node: seek source file: %w", err)
	}
	return f, nil
}
