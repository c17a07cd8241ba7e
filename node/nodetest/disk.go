package nodetest

import (
	"os"
	"os/exec"
	"testing"
)

// SmallDisk mounts a tmpfs of size (as mount's size option: "8m") in a
// temporary directory and returns its path, or skips the test when this
// process may not mount one (it needs root). It is unmounted at cleanup.
func SmallDisk(t testing.TB, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// Damage overwrites 8 bytes in the middle of the file at path, its size
// unchanged: a partition file damaged in place, which its manifest's
// checksum no longer matches.
func Damage(t testing.TB, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("damaged!"), st.Size()/2); err != nil {
		t.Fatal(err)
	}
}
