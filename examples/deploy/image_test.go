package deploy

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spangledb/spangle/node/nodetest"
)

// runtimeStage returns the instructions of a Dockerfile's last stage
// (from its last FROM), comments and blank lines left out.
func runtimeStage(t testing.TB, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var stage []string
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "FROM "):
			stage = []string{line}
		default:
			stage = append(stage, line)
		}
	}
	return stage
}

// TestDockerfilesAgree checks that Dockerfile (built from source, pulling
// the golang image) and Dockerfile.prebuilt (make image, pulling nothing)
// make the same runtime stage: the same instructions, the files taken
// from the build stage's /out instead of the context.
func TestDockerfilesAgree(t *testing.T) {
	src := runtimeStage(t, "Dockerfile")
	pre := runtimeStage(t, "Dockerfile.prebuilt")
	for i, line := range src {
		src[i] = strings.Replace(line, "--from=build /out/", "", 1)
	}
	if strings.Join(src, "\n") != strings.Join(pre, "\n") {
		t.Fatalf("the runtime stages differ:\nDockerfile:\n%s\n\nDockerfile.prebuilt:\n%s", strings.Join(src, "\n"), strings.Join(pre, "\n"))
	}
	if pre[0] != "FROM scratch" {
		t.Fatalf("the runtime stage starts %q, want FROM scratch", pre[0])
	}
	// The build from source builds as make build does.
	raw, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte("CGO_ENABLED=0 go build -trimpath ")) {
		t.Error("Dockerfile does not build with CGO_ENABLED=0 go build -trimpath")
	}
	mk, err := os.ReadFile(filepath.Join(repo, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(mk, []byte("CGO_ENABLED=0 $(GO) build -trimpath ")) {
		t.Error("make build does not build with CGO_ENABLED=0 -trimpath")
	}
}

// goImage is the build stage's base image in Dockerfile.
const goImage = "docker.io/library/golang:1.26-bookworm"

// TestDockerfileFromSource builds Dockerfile, the build from source, when
// the golang image is on this machine (it cannot be pulled in sandboxes
// such as CI's; TestDockerfilesAgree covers its runtime stage then).
func TestDockerfileFromSource(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an image")
	}
	podman := needTool(t, "podman", "podman")
	if exec.Command(podman, "image", "exists", goImage).Run() != nil {
		t.Skipf("%s is not on this machine (podman pull it to run this test)", goImage)
	}
	raw, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte("FROM "+goImage+" AS build")) {
		t.Fatalf("Dockerfile does not build FROM %s", goImage)
	}
	tag := fmt.Sprintf("localhost/spangle-deploy-test-src:%d", time.Now().UnixNano())
	build := exec.Command(podman, "build", "--format", "docker", "--pull=never", "--ignorefile", "examples/deploy/Dockerfile.dockerignore",
		"-f", "examples/deploy/Dockerfile", "-t", tag, ".")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("podman build: %v\n%s", err, out)
	}
	exec.Command(podman, "rmi", "-f", tag).Run()
}

// imageConfig is what this test reads of podman image inspect.
type imageConfig struct {
	Size   int64
	Config struct {
		User       string
		Env        []string
		Entrypoint []string
		Cmd        []string
		WorkingDir string
		Volumes    map[string]struct{}
	}
	Healthcheck struct {
		Test []string
	}
}

// TestImage builds the image as make image does (image.sh on the static
// binary, podman build, nothing pulled), checks its contents, and runs its
// entrypoint from the exported root file system (podman run is refused by
// sandboxes such as CI's: setrlimit): chrooted, as the image's user, in a
// network namespace of its own, with the example data where the image's
// config looks for a source (the volume an operator mounts). The image's
// HEALTHCHECK command must turn healthy, spangle get (the image's binary)
// must read a key, and SIGTERM must stop it cleanly.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an image and runs the binary")
	}
	podman := needTool(t, "podman", "podman")
	for _, tool := range [][2]string{{"unshare", "util-linux"}, {"nsenter", "util-linux"}, {"chroot", "coreutils"}, {"ip", "iproute2"}, {"tar", "tar"}} {
		needTool(t, tool[0], tool[1])
	}
	if os.Geteuid() != 0 {
		t.Skip("running the image's root file system takes root (chroot, a network namespace)")
	}
	bin := buildBinary(t)

	tag := fmt.Sprintf("localhost/spangle-deploy-test:%d", time.Now().UnixNano())
	if out, err := exec.Command("./image.sh", bin, tag).CombinedOutput(); err != nil {
		t.Fatalf("image.sh: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command(podman, "rmi", "-f", tag).Run() })
	out, err := exec.Command(podman, "image", "inspect", tag).Output()
	if err != nil {
		t.Fatalf("podman image inspect: %v", err)
	}
	var images []imageConfig
	if err := json.Unmarshal(out, &images); err != nil || len(images) != 1 {
		t.Fatalf("podman image inspect: %v\n%s", err, out)
	}
	img := images[0]
	t.Logf("image size: %d bytes (%.1f MiB)", img.Size, float64(img.Size)/(1<<20))
	if img.Config.User != "65532:65532" {
		t.Errorf("image user %q, want 65532:65532", img.Config.User)
	}
	if _, ok := img.Config.Volumes["/var/lib/spangle"]; !ok {
		t.Errorf("image volumes %v lack /var/lib/spangle", img.Config.Volumes)
	}
	health := img.Healthcheck.Test
	if len(health) < 2 || health[0] != "CMD" {
		t.Fatalf("image healthcheck %q, want CMD …", health)
	}
	if len(img.Config.Entrypoint) == 0 {
		t.Fatal("image has no entrypoint")
	}

	// The exported root file system.
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	id, err := exec.Command(podman, "create", "--no-healthcheck", tag).Output()
	if err != nil {
		t.Fatalf("podman create: %v", err)
	}
	t.Cleanup(func() { exec.Command(podman, "rm", "-f", strings.TrimSpace(string(id))).Run() })
	tarball := filepath.Join(dir, "root.tar")
	if out, err := exec.Command(podman, "export", "-o", tarball, strings.TrimSpace(string(id))).CombinedOutput(); err != nil {
		t.Fatalf("podman export: %v\n%s", err, out)
	}
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("tar", "-x", "--numeric-owner", "-f", tarball, "-C", root).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	checkRootFS(t, root, img.Config.User)

	// The source the image's config names, as a read-only mount would
	// put it there.
	var conf struct{ Source string }
	confBody, err := os.ReadFile(filepath.Join(root, "etc", "spangle", "spangle.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(confBody), "\n") { // one key is all this needs
		if v, ok := strings.CutPrefix(line, "source = "); ok {
			if err := json.Unmarshal([]byte(v), &conf.Source); err != nil {
				t.Fatalf("source = %s: %v", v, err)
			}
		}
	}
	if !strings.HasPrefix(conf.Source, "/") {
		t.Fatalf("the image's config names source %q, not a directory to mount", conf.Source)
	}
	if err := os.MkdirAll(filepath.Dir(filepath.Join(root, conf.Source)), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-R", exampleData(t), filepath.Join(root, conf.Source)).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}

	// The entrypoint, as the runtime would start it.
	inRoot := func(argv ...string) []string {
		return append([]string{"chroot", "--userspec=" + img.Config.User, root}, argv...)
	}
	entry := append(append([]string{}, img.Config.Entrypoint...), img.Config.Cmd...)
	cmd := exec.Command("unshare", "--net", "--", "sh", "-c", `ip link set lo up && exec "$@"`, "sh")
	cmd.Args = append(cmd.Args, inRoot(append(entry, "--log-format", "json")...)...)
	cmd.Env = img.Config.Env
	logs := &logBuffer{}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { // joined below or by the cleanup
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs.add(sc.Text())
		}
		done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.Process.Kill() == nil {
			<-done
		}
	})
	// Commands in the container's network namespace and root.
	netns := fmt.Sprintf("--net=/proc/%d/ns/net", cmd.Process.Pid)
	inContainer := func(argv ...string) *exec.Cmd {
		c := exec.Command("nsenter", append([]string{netns, "--"}, inRoot(argv...)...)...)
		c.Env = img.Config.Env
		return c
	}

	nodetest.WaitFor(t, testTimeout, "the image's HEALTHCHECK to pass", func() error {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("the entrypoint exited: %v\n%s", err, logs)
		default:
		}
		if out, err := inContainer(health[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(health[1:], " "), err, out)
		}
		return nil
	})
	out, err = inContainer("/usr/bin/spangle", "get", "baby-names", "1881/boy").Output()
	if err != nil || string(out) != "John\n" {
		t.Fatalf("spangle get baby-names 1881/boy in the container: %v %q\n%s", err, out, logs)
	}
	// The data dir is the image's volume, written by its user.
	if fi, err := os.Stat(filepath.Join(root, "var", "lib", "spangle", "dbs", "baby-names")); err != nil {
		t.Fatalf("the data dir holds no build: %v", err)
	} else if uid := fi.Sys().(*syscall.Stat_t).Uid; fmt.Sprint(uid) != strings.Split(img.Config.User, ":")[0] {
		t.Errorf("the build is owned by uid %d, not the image's user", uid)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		done <- err
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, logs)
		}
	case <-time.After(testTimeout):
		t.Fatalf("still running %v after SIGTERM:\n%s", testTimeout, logs)
	}
	if !strings.Contains(logs.String(), `"msg":"stopped"`) {
		t.Fatalf("no clean stop in the log:\n%s", logs)
	}
}

// checkRootFS checks the exported root: a static binary, CA
// certificates, a passwd naming the image's user, and the data dir that
// user owns (and nothing above it).
func checkRootFS(t *testing.T, root, user string) {
	t.Helper()
	f, err := elf.Open(filepath.Join(root, "usr", "bin", "spangle"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the image's binary is dynamically linked: scratch has no libc")
		}
	}
	if fi, err := os.Stat(filepath.Join(root, "etc", "ssl", "certs", "ca-certificates.crt")); err != nil || fi.Size() == 0 {
		t.Errorf("no CA certificates in the image: %v", err)
	}
	uid, gid, _ := strings.Cut(user, ":")
	passwd, err := os.ReadFile(filepath.Join(root, "etc", "passwd"))
	if err != nil || !bytes.Contains(passwd, []byte(":x:"+uid+":"+gid+":")) {
		t.Errorf("/etc/passwd names no user %s: %v\n%s", user, err, passwd)
	}
	for path, owner := range map[string]string{"var/lib/spangle": uid, "var/lib": "0", "var": "0", "etc": "0"} {
		fi, err := os.Stat(filepath.Join(root, path))
		if err != nil {
			t.Error(err)
			continue
		}
		if got := fmt.Sprint(fi.Sys().(*syscall.Stat_t).Uid); got != owner {
			t.Errorf("/%s is owned by uid %s, want %s", path, got, owner)
		}
	}
}
