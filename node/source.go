package node

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Source is where versions come from: a root holding <db>/<version>/<files>.
// Implementations are safe for concurrent use.
type Source interface {
	// String is the root as people write it, for status and logs.
	String() string
	// ListDBs lists the valid db names under the root, sorted.
	ListDBs(ctx context.Context) ([]string, error)
	// ListVersions lists the db's valid, complete version names in byte-wise
	// order: with requireSuccess, only versions holding _SUCCESS.
	ListVersions(ctx context.Context, db string, requireSuccess bool) ([]string, error)
	// ListFiles lists the version's data files (not those starting with "_"
	// or ".", no directories) sorted by name.
	ListFiles(ctx context.Context, db, version string) ([]SourceFile, error)
	// Open opens one data file for reading.
	Open(ctx context.Context, db, version, file string) (io.ReadCloser, error)
	// Path is the display path of a version, as the status shows it.
	Path(db, version string) string
}

// SourceFile is a data file of a version.
type SourceFile struct {
	Name string
	Size int64 // -1 when unknown
	// ModTime is when the file was written or uploaded; zero when
	// unknown. The newest of a version's files dates the version for
	// HTTP caches (Last-Modified), the same on every node.
	ModTime time.Time
}

var validName = regexp.MustCompile(`^[-_a-zA-Z0-9]+$`)

// ValidName reports whether s is a valid db or version name.
func ValidName(s string) bool { return validName.MatchString(s) }

// isDataFile reports whether a file name in a version directory is data.
func isDataFile(name string) bool {
	return name != "" && !strings.HasPrefix(name, "_") && !strings.HasPrefix(name, ".")
}

// OpenSource returns the Source for a root written as a path or a URL:
// a local path, or file:///path. Symlinks that leave the root are refused
// (see OpenFileSource).
func OpenSource(root string) (Source, error) { return OpenFileSource(root, false) }

// OpenFileSource is OpenSource; followExternal lets the source follow
// symlinks that resolve outside root (Config.AllowExternalSymlinks).
func OpenFileSource(root string, followExternal bool) (Source, error) {
	if root == "" {
		return nil, fmt.Errorf("%w: empty source", ErrConfig)
	}
	u, err := url.Parse(root)
	if err == nil && u.Scheme != "" && len(u.Scheme) > 1 { // a one-letter scheme is a Windows drive
		switch u.Scheme {
		case "file":
			if u.Host != "" && u.Host != "localhost" {
				return nil, fmt.Errorf("%w: source %q has a host (likely missing a '/')", ErrConfig, root)
			}
			return newFileSource(filepath.FromSlash(u.Path), followExternal)
		default:
			return nil, fmt.Errorf("%w: source %q: unsupported scheme %q", ErrConfig, root, u.Scheme)
		}
	}
	return newFileSource(root, followExternal)
}

// RangeSource is a Source that can open a file from a byte offset. A
// download that fails mid-file resumes where it stopped instead of reading
// the file again from the start.
type RangeSource interface {
	Source
	// OpenAt opens file for reading from offset (0 ≤ offset ≤ size).
	OpenAt(ctx context.Context, db, version, file string, offset int64) (io.ReadCloser, error)
}
