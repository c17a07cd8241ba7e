package spangle

import (
	"os/exec"
	"strings"
	"testing"
)

// TestMakeRun: make run's embedded NATS address can be set, as BIND and
// DATA_DIR can (issue 38: it was always 127.0.0.1:4222), and by default
// it is the one the CLI's --nats flags assume.
func TestMakeRun(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not installed")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--nats-listen 127.0.0.1:4222"},
		{[]string{"NATS_LISTEN=127.0.0.1:4223", "BIND=127.0.0.1:9600", "DATA_DIR=/tmp/d"}, "--data-dir /tmp/d --bind 127.0.0.1:9600 --nats-listen 127.0.0.1:4223"},
	} {
		out, err := exec.Command("make", append([]string{"-n", "run"}, tc.args...)...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("make -n run %s: %v, want %q in:\n%s", strings.Join(tc.args, " "), err, tc.want, out)
		}
	}
}
