package nodetest

import (
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
