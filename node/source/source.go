package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/spangledb/spangle/kvwatch/names"
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

// NamePattern is what db and version names (and node and shard IDs) match:
// names.Pattern.
const NamePattern = names.Pattern

// ValidName reports whether s is a valid db or version name (names.Valid).
func ValidName(s string) bool { return names.Valid(s) }

// IsDataFile reports whether a file name in a version directory is data:
// names starting with "_" or "." (_SUCCESS, _logs, .crc files) are not.
func IsDataFile(name string) bool {
	return name != "" && !strings.HasPrefix(name, "_") && !strings.HasPrefix(name, ".")
}

// Open returns the Source for a root written as a path or a URL: a local
// path, or file:///path. Symlinks that resolve outside the root are refused
// (ErrSymlinkOutside) unless followExternal is set.
func Open(root string, followExternal bool) (Source, error) {
	if root == "" {
		return nil, errors.New("source: empty root")
	}
	u, err := url.Parse(root)
	if err == nil && u.Scheme != "" && len(u.Scheme) > 1 { // a one-letter scheme is a Windows drive
		switch u.Scheme {
		case "file":
			if u.Host != "" && u.Host != "localhost" {
				return nil, fmt.Errorf("source: %q has a host (likely missing a '/')", root)
			}
			return newFileSource(filepath.FromSlash(u.Path), followExternal)
		default:
			return nil, fmt.Errorf("source: %q: unsupported scheme %q", root, u.Scheme)
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
