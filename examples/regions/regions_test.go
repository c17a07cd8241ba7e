// Package regions holds no code: its test runs examples/regions/run.sh,
// a hub and two regions on this machine, as a user would.
package regions

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.uber.org/goleak"

	"github.com/spangledb/spangle/kvwatch"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// freeBase returns a port p with p..p+13 free a moment ago, below the
// range the system hands out to outgoing connections (which other tests
// running meanwhile would take from under the script).
func freeBase(t *testing.T) int {
	t.Helper()
	for range 50 {
		p := 20000 + rand.IntN(10000)
		free := true
		for i := 1; i <= 13 && free; i++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+i))
			if err != nil {
				free = false
				continue
			}
			l.Close()
		}
		if free {
			return p
		}
	}
	t.Fatal("no 14 free ports in a row")
	return 0
}

// TestRunScript runs run.sh: every node of both regions serves version
// 1, then 2; the region pin moves us back to 1 alone; status --regions
// shows it. It builds into a temporary directory (BIN) and publishes a
// copy of the example data (DATA): the repository's bin/ and examples/
// are as they were (make test rewrote bin/spangle, make build's static
// binary, with a dynamically linked one).
func TestRunScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds spangle and nats-server and runs a hub and two regions")
	}
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	binDir, data := t.TempDir(), filepath.Join(t.TempDir(), "1")
	if err := os.CopyFS(data, os.DirFS(filepath.Join("..", "data", "baby-names", "1"))); err != nil {
		t.Fatal(err)
	}
	before := treeState(t)
	cmd := exec.Command("bash", "run.sh")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT_BASE=%d", freeBase(t)), "DEADLINE_SECS=120", "KEEP=",
		"BIN="+binDir, "DATA="+data)
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { // bounded: the script's own deadlines, and the kill below
		defer close(done)
		out, err = cmd.CombinedOutput()
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("run.sh still running after 5 min:\n%s", out)
	}
	if err != nil {
		t.Fatalf("run.sh: %v\n%s", err, out)
	}
	if after := treeState(t); after != before {
		t.Errorf("run.sh changed the repository's bin/ or examples/:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	for _, name := range []string{"spangle", "nats-server"} {
		if _, err := os.Stat(filepath.Join(binDir, name)); err != nil {
			t.Errorf("run.sh did not build %s into BIN: %v", name, err)
		}
	}
	s := string(out)
	for _, want := range []string{
		"every node of eu and us serves version 1",
		"every node serves version 2",
		"$ spangle status --regions",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("run.sh did not print %q:\n%s", want, s)
		}
	}
	// REGION CONNECTED PENDING NODES DB ACTIVE REGION PIN
	for _, row := range []string{`eu\s+yes\s+0\s+1\s+baby-names\s+2\s+-`, `us\s+yes\s+0\s+2\s+baby-names\s+1\s+1`} {
		if !regexp.MustCompile(`(?m)^` + row).MatchString(s) {
			t.Errorf("status --regions has no row %q:\n%s", row, s)
		}
	}
}

// treeState describes the repository's bin/ and examples/ as a test
// could change them: each file's path, size and modification time.
func treeState(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, dir := range []string{filepath.Join("..", "..", "bin"), ".."} {
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) {
					return nil
				}
				return err
			}
			if d.IsDir() {
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, "%s %d %s\n", path, fi.Size(), fi.ModTime().Format(time.RFC3339Nano))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// TestHubConf: hub.conf's accounts block is what spangle
// nats-permissions --accounts --hub-domain hub --cluster example
// --buckets example --regions eu,us prints (kvwatch.HubAccountsConfig),
// with one login line added to some accounts, and the permissions it
// gives each login ($REGION_EU, $REGION_US, $OPS, $ETL) are exactly the
// lists nats-permissions prints for its role; and nats-server parses it.
func TestHubConf(t *testing.T) {
	b, err := os.ReadFile("hub.conf")
	if err != nil {
		t.Fatal(err)
	}
	conf := string(b)
	// As run.sh fills it in.
	filled := strings.NewReplacer("$HUB_PORT", "4440", "$HUB_LEAF_PORT", "4441", "$HUB_MONITOR", "4442", "$WORK", t.TempDir()).Replace(conf)
	path := filepath.Join(t.TempDir(), "hub.conf")
	if err := os.WriteFile(path, []byte(filled), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := (&server.Options{}).ProcessConfigFile(path); err != nil {
		t.Errorf("nats-server does not take hub.conf: %v", err)
	}
	scope := kvwatch.Scope{Cluster: "example", HubDomain: "hub", ObjectBuckets: []string{"example"}, Accounts: true}
	want, err := kvwatch.HubAccountsConfig(scope, []string{"eu", "us"})
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(conf, "accounts {\n")
	if i < 0 {
		t.Fatal("no accounts block in hub.conf")
	}
	got := regexp.MustCompile(`(?m)^\s*\{ user: .*\}\n`).ReplaceAllString(conf[i:], "")
	if got != want {
		t.Errorf("hub.conf's accounts block, without its logins:\n%s\nwant\n%s", got, want)
	}
	for name, role := range map[string]string{"REGION_EU": "region eu", "REGION_US": "region us", "OPS": "operator", "ETL": "publisher"} {
		block := regexp.MustCompile(`(?s)` + name + ` = \{.*?publish: \{\s*allow: \[(.*?)\].*?subscribe: \{\s*allow: \[(.*?)\]`).FindStringSubmatch(conf)
		if block == nil {
			t.Fatalf("no %s block with publish and subscribe in hub.conf", name)
		}
		s := scope
		r, region, _ := strings.Cut(role, " ")
		s.Region = region
		p, err := kvwatch.RolePermissions(r, s)
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range [][]string{p.Publish.Allow, p.Subscribe.Allow} {
			var got []string
			for _, m := range regexp.MustCompile(`"([^"]+)"`).FindAllStringSubmatch(block[i+1], -1) {
				got = append(got, m[1])
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s's allow-list %d in hub.conf:\n%q\nwant\n%q", name, i+1, got, want)
			}
		}
	}
}
