package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestFileSourceRefusesNonRegular: a directory, a dangling symlink, a
// FIFO, a socket-like special file or a symlink leaving the root among a
// version's data files fails its listing with a reason naming the entry,
// instead of building the version from the other files. A symlink within
// the root is followed, and hidden/underscore names are still skipped.
func TestFileSourceRefusesNonRegular(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.WriteFile(outside, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		make  func(t *testing.T, path string)
		want  error
		says  string
		follw bool // AllowExternalSymlinks
	}{
		{"directory", func(t *testing.T, p string) { must0(t, os.Mkdir(p, 0o755)) }, ErrNotRegular, "is a directory", false},
		{"dangling symlink", func(t *testing.T, p string) { must0(t, os.Symlink(p+".gone", p)) }, ErrNotRegular, "dangling symlink", false},
		{"FIFO", func(t *testing.T, p string) { must0(t, syscall.Mkfifo(p, 0o644)) }, ErrNotRegular, "is a FIFO", false},
		{"symlink outside the root", func(t *testing.T, p string) { must0(t, os.Symlink(outside, p)) }, ErrSymlinkOutside, "resolves to", false},
		{"symlink outside, allowed", func(t *testing.T, p string) { must0(t, os.Symlink(outside, p)) }, nil, "", true},
		{"symlink inside the root", func(t *testing.T, p string) {
			must0(t, os.Symlink(filepath.Join(filepath.Dir(p), "part-00000"), p))
		}, nil, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "d", "v1")
			must0(t, os.MkdirAll(dir, 0o755))
			for i := range 3 {
				must0(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("part-%05d", i)), []byte("data"), 0o644))
			}
			tc.make(t, filepath.Join(dir, "part-00009"))
			must0(t, os.Mkdir(filepath.Join(dir, "_logs"), 0o755)) // skipped, as Hadoop's
			src, err := Open(root, tc.follw)
			if err != nil {
				t.Fatal(err)
			}
			files, err := src.ListFiles(context.Background(), "d", "v1")
			if tc.want == nil {
				if err != nil || len(files) != 4 {
					t.Fatalf("ListFiles: %d files, %v; want 4", len(files), err)
				}
				return
			}
			if !errors.Is(err, tc.want) || !errors.Is(err, ErrPermanent) || !strings.Contains(err.Error(), "part-00009") ||
				!strings.Contains(err.Error(), tc.says) {
				t.Fatalf("ListFiles: %v; want %v naming part-00009 and %q", err, tc.want, tc.says)
			}
		})
	}
}

func must0(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
