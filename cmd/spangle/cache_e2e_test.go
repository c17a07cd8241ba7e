package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spangledb/spangle/kvwatch/natstest"
	"github.com/spangledb/spangle/node/nodetest"
)

// TestBehindCaches runs a node behind a real Varnish and a real nginx,
// configured by the files in examples/edge, and checks what a client of
// each cache sees:
//   - values are cached (a second read is a hit), status, health and
//     metrics never are;
//   - after a version switch, a db without a purge hook is served at its
//     new version within max-age + 1 s, 404s of keys the new version
//     brings within the negative max-age + 1 s;
//   - a db with a purge hook (a BAN to Varnish, emptying nginx's cache
//     directory) is served at its new version as soon as the hook ran,
//     although its max-age is five minutes;
//   - a db whose hook purges key by key (max_keys: a Varnish ban of the
//     changed keys' URLs, nginx's cache files of those URLs deleted)
//     serves its changed and new keys at once, and its unchanged keys
//     stay cache hits across the switch;
//   - a db without a hook, once its max-age passed: nginx revalidates,
//     and an unchanged value (same ETag) is a 304 (REVALIDATED), a
//     changed one fetched anew;
//   - the last two again with v2 a delta version over v1 (dbs kd, md,
//     rd: upserts, a deleted key, _BASE, as a batch job writes one):
//     the keys the delta changed, added and deleted are fetched anew,
//     its unchanged keys stay hits, and revalidated they are 304s.
//
// It is skipped when nginx or varnishd is not installed (make deps-cache).
func TestBehindCaches(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary, nginx and varnishd")
	}
	nginx, errN := exec.LookPath("nginx")
	varnishd, errV := exec.LookPath("varnishd")
	_, errC := exec.LookPath("cc") // varnishd compiles its VCL
	if errN != nil || errV != nil || errC != nil {
		t.Skip("nginx, varnishd or a C compiler is not installed: make deps-cache installs them (Debian packages)")
	}
	const keys = 20
	bin := buildBinary(t)
	root := t.TempDir()
	for _, db := range []string{"a", "b", "c", "k", "m", "r", "kd", "md", "rd"} {
		writeVersion(t, root, db, "v1", 2, keys)
	}
	work := t.TempDir()
	nginxCache := filepath.Join(work, "nginx-cache")
	if err := os.MkdirAll(nginxCache, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(nginxCache, 0o777) // nginx's workers may run as another user
	varnishPort, nginxPort := natstest.FreePort(t), natstest.FreePort(t)
	cfgPath := filepath.Join(work, "spangle.toml")
	cfg := fmt.Sprintf(`cache_control = "public, max-age=2"
negative_cache_control = "public, max-age=1"
[dbs.b]
cache_control = "public, max-age=300"
negative_cache_control = "public, max-age=300"
[dbs.b.purge]
url = "http://127.0.0.1:%d/"
method = "BAN"
headers = { X-Spangle-DB = "{db}", X-Spangle-Version = "{version}" }
[dbs.c]
cache_control = "public, max-age=300"
negative_cache_control = "public, max-age=300"
[dbs.c.purge]
command = ["find", %q, "-type", "f", "-delete"]
`, varnishPort, nginxCache)
	// k, r and m: purged by path (a Varnish BAN of a paths regex; none,
	// a short max-age; nginx's cache files removed); kd, rd and md the
	// same, their versions published as deltas.
	for _, suffix := range []string{"", "d"} {
		cfg += fmt.Sprintf(`[dbs.k%[1]s]
cache_control = "public, max-age=300"
negative_cache_control = "public, max-age=300"
[dbs.k%[1]s.purge]
url = "http://127.0.0.1:%[2]d/"
method = "BAN"
max_keys = 10
headers = { X-Spangle-DB = "{db}", X-Spangle-Version = "{version}", X-Spangle-Paths = "{paths_regex}" }
[dbs.r%[1]s]
cache_control = "public, max-age=1"
[dbs.m%[1]s]
cache_control = "public, max-age=300"
negative_cache_control = "public, max-age=300"
[dbs.m%[1]s.purge]
max_keys = 10
command = ["sh", "-c", "for p in $1; do h=$(printf %%s \"$p\" | md5sum | cut -c1-32); rm -f \"$0/$(echo $h | cut -c32)/$(echo $h | cut -c30-31)/$h\"; done", %[3]q, "{paths}"]
`, suffix, varnishPort, nginxCache)
	}
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, bin, false, "--source", root, "--config", cfgPath)
	s.logOnFailure(t)
	upstream := strings.TrimPrefix(s.http, "http://")
	host, port, _ := strings.Cut(upstream, ":")

	// Varnish, with examples/edge/varnish.vcl pointed at the node.
	vcl := readExample(t, "varnish.vcl")
	vcl = strings.Replace(vcl, `.host = "127.0.0.1";`, fmt.Sprintf(".host = %q;", host), 1)
	vcl = strings.Replace(vcl, `.port = "8080";`, fmt.Sprintf(".port = %q;", port), 1)
	vclPath := filepath.Join(work, "spangle.vcl")
	if err := os.WriteFile(vclPath, []byte(vcl), 0o644); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, "varnishd", varnishd, "-F", "-j", "none", "-n", filepath.Join(work, "varnish"),
		"-a", fmt.Sprintf("127.0.0.1:%d", varnishPort), "-f", vclPath, "-s", "malloc,32m")

	// nginx, with examples/edge/nginx.conf pointed at the node and a
	// cache directory of the test's.
	conf := readExample(t, "nginx.conf")
	for from, to := range map[string]string{
		"/var/cache/nginx/spangle":    nginxCache,
		"server 127.0.0.1:8080;":      "server " + upstream + ";",
		"listen 127.0.0.1:8081;":      fmt.Sprintf("listen 127.0.0.1:%d;", nginxPort),
		"pid /run/nginx-spangle.pid;": "pid " + filepath.Join(work, "nginx.pid") + ";",
		"worker_processes 1;":         "worker_processes 1;\nuser root;",
		"use_temp_path=off;":          "use_temp_path=off;\n    client_body_temp_path " + filepath.Join(work, "nginx-body") + ";",
		"proxy_http_version 1.1;":     "proxy_http_version 1.1;\n            proxy_temp_path " + filepath.Join(work, "nginx-proxy") + ";",
	} {
		if !strings.Contains(conf, from) {
			t.Fatalf("examples/edge/nginx.conf lacks %q", from)
		}
		conf = strings.ReplaceAll(conf, from, to)
	}
	if os.Geteuid() != 0 {
		conf = strings.Replace(conf, "\nuser root;", "", 1)
	}
	confPath := filepath.Join(work, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, "nginx", nginx, "-p", work, "-c", confPath, "-g", "daemon off;")

	caches := map[string]string{
		"varnish": fmt.Sprintf("http://127.0.0.1:%d", varnishPort),
		"nginx":   fmt.Sprintf("http://127.0.0.1:%d", nginxPort),
	}
	for name, base := range caches {
		waitFor(t, name+" to answer", func() error {
			_, err := cacheGet(base + "/a/key-0")
			return err
		})
	}

	// 1. What is cached, and what never is.
	for name, base := range caches {
		for _, path := range []string{"/a/key-1", "/a/new-key"} {
			cacheGet(base + path)
			if r, _ := cacheGet(base + path); r.cache != "HIT" {
				t.Errorf("%s: a second GET %s: %s, want a HIT", name, path, r.cache)
			}
		}
		for _, path := range []string{"/", "/a/", "/healthz", "/readyz", "/livez", "/metrics"} {
			for range 2 {
				if r, err := cacheGet(base + path); err != nil || r.cache == "HIT" || r.cacheControl != "no-store" {
					t.Errorf("%s: GET %s: %+v, %v: want no-store, never a HIT", name, path, r, err)
				}
			}
		}
		r, _ := cacheGet(base + "/")
		if r.vary != "Accept" {
			t.Errorf("%s: the status page varies by %q, want Accept", name, r.vary)
		}
		// Fill the caches with v1 of every db.
		for _, db := range []string{"a", "b", "c", "k", "m", "kd", "md"} {
			for k := range keys {
				cacheGet(fmt.Sprintf("%s/%s/key-%d", base, db, k))
			}
			cacheGet(base + "/" + db + "/new-key")
		}
	}

	// 2. A switch to v2: new values, and new-key exists.
	for _, db := range []string{"a", "b", "c"} {
		recs := append(nodetest.Numbered("v2", keys), nodetest.Record{Key: []byte("new-key"), Value: []byte("new-key")})
		nodetest.WriteVersion(t, root, db, "v2", 2, recs)
	}
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for _, db := range []string{"a", "b", "c"} {
		waitFor(t, "the node on v2 of "+db, func() error { return wantValue(s.http+"/"+db+"/key-1", "v2:1") })
	}
	switched := time.Now()

	// Purged dbs: v2 as soon as the hook ran (their max-age is 300 s).
	waitFor(t, "the purges of b and c", func() error {
		for _, db := range []string{"b", "c"} {
			if !strings.Contains(s.logs.String(), `"msg":"caches purged","component":"purge","db":"`+db+`","version":"v2"`) {
				return fmt.Errorf("no purge of %s logged", db)
			}
		}
		return nil
	})
	if err := wantValue(caches["varnish"]+"/b/key-1", "v2:1"); err != nil {
		t.Errorf("varnish after the BAN: %v", err)
	}
	if err := wantValue(caches["nginx"]+"/c/key-1", "v2:1"); err != nil {
		t.Errorf("nginx after its cache was emptied: %v", err)
	}
	if err := wantValue(caches["varnish"]+"/b/new-key", "new-key"); err != nil {
		t.Errorf("varnish's 404 after the BAN: %v", err)
	}

	// A db without a hook: v2 within max-age + 1 s, a new key within the
	// negative max-age + 1 s, through both caches.
	for name, base := range caches {
		for _, c := range []struct {
			path, want string
			within     time.Duration
		}{
			{"/a/key-1", "v2:1", 3 * time.Second},
			{"/a/key-7", "v2:7", 3 * time.Second},
			{"/a/new-key", "new-key", 2 * time.Second},
		} {
			var last error
			for {
				last = wantValue(base+c.path, c.want)
				if last == nil {
					break
				}
				if time.Since(switched) > c.within {
					t.Errorf("%s: %s still stale %v after the switch: %v", name, c.path, c.within, last)
					break
				}
				time.Sleep(50 * time.Millisecond) // polling interval
			}
		}
	}

	// 3. Key by key purges: k and m switch to a v2 where key-1 changed and
	// new-key is added, every other key the same; kd and md to a delta v2
	// over v1 doing the same and deleting key-3. Their caches are filled
	// again first (c's hook emptied nginx's whole cache directory).
	for name, base := range caches {
		for _, db := range []string{"k", "m", "kd", "md"} {
			for k := range keys {
				path := fmt.Sprintf("%s/%s/key-%d", base, db, k)
				if r, _ := cacheGet(path); r.cache != "HIT" {
					if r, _ := cacheGet(path); r.cache != "HIT" {
						t.Fatalf("%s: %s not cached: %+v", name, path, r)
					}
				}
			}
			cacheGet(base + "/" + db + "/new-key")
		}
	}
	// r and rd (max-age 1 s, no hook) in nginx, for its revalidations.
	for _, db := range []string{"r", "rd"} {
		for k := range keys {
			cacheGet(fmt.Sprintf("%s/%s/key-%d", caches["nginx"], db, k))
		}
	}
	newKey := nodetest.Record{Key: []byte("new-key"), Value: []byte("new-key")}
	for _, db := range []string{"k", "m", "r"} {
		recs := append(nodetest.Numbered("v1", keys), newKey)
		recs[1].Value = []byte("v2:1")
		nodetest.WriteVersion(t, root, db, "v2", 2, recs)
	}
	for _, db := range []string{"kd", "md", "rd"} {
		nodetest.WriteDelta(t, root, db, "v2", "v1", []nodetest.Record{{Key: []byte("key-1"), Value: []byte("v2:1")}, newKey}, "key-3")
	}
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// The changed key and the new one at once (and the delta's deleted
	// one), the unchanged ones still hits.
	purged := map[string]int{"k": 2, "m": 2, "kd": 3, "md": 3}
	waitFor(t, "the key by key purges of k, m, kd and md", func() error {
		for db, keys := range purged {
			if !strings.Contains(s.logs.String(), fmt.Sprintf(`"msg":"changed keys purged","component":"purge","db":"%s","version":"v2","previous":"v1","keys":%d`, db, keys)) {
				return fmt.Errorf("no key by key purge of %d keys of %s logged", keys, db)
			}
		}
		return nil
	})
	for db, base := range map[string]string{"k": caches["varnish"], "m": caches["nginx"], "kd": caches["varnish"], "md": caches["nginx"]} {
		if err := wantValue(base+"/"+db+"/key-1", "v2:1"); err != nil {
			t.Errorf("%s after its key by key purge: %v", db, err)
		}
		if err := wantValue(base+"/"+db+"/new-key", "new-key"); err != nil {
			t.Errorf("%s's 404 after its key by key purge: %v", db, err)
		}
		if r, err := cacheGet(base + "/" + db + "/key-3"); purged[db] == 3 && (err != nil || r.status != http.StatusNotFound) {
			t.Errorf("%s/key-3, deleted by the delta, after its key by key purge: %+v, %v; want a 404", db, r, err)
		}
		for _, k := range []int{0, 2, 7, 19} {
			r, err := cacheGet(fmt.Sprintf("%s/%s/key-%d", base, db, k))
			if err != nil || r.cache != "HIT" || r.body != fmt.Sprintf("v1:%d", k) {
				t.Errorf("%s/key-%d, unchanged, after the switch: %+v, %v; want a HIT", db, k, r, err)
			}
		}
	}

	// r and rd, without a hook: once their 1 s max-age passed, nginx
	// revalidates (If-None-Match): an unchanged value keeps its ETag (rd's
	// v2, built over v1, as well), the node answers 304 and the cached
	// copy is served again (REVALIDATED); a changed one is fetched anew
	// (EXPIRED), a deleted one too (a 404).
	type revalidation struct {
		key, body, cache string
		status           int
	}
	for _, db := range []string{"r", "rd"} {
		waitFor(t, "the node on v2 of "+db, func() error { return wantValue(s.http+"/"+db+"/key-1", "v2:1") })
		cases := []revalidation{
			{"key-2", "v1:2", "REVALIDATED", 200},
			{"key-5", "v1:5", "REVALIDATED", 200},
			{"key-1", "v2:1", "EXPIRED", 200},
		}
		if db == "rd" {
			cases = append(cases, revalidation{"key-3", "", "EXPIRED", 404})
		}
		for _, c := range cases {
			path := "/" + db + "/" + c.key
			var r cacheResult
			waitFor(t, path+" no longer fresh in nginx", func() error {
				var err error
				if r, err = cacheGet(caches["nginx"] + path); err == nil && r.cache == "HIT" {
					return fmt.Errorf("still a HIT")
				}
				return err
			})
			if r.cache != c.cache || r.status != c.status || (c.status == 200 && r.body != c.body) {
				t.Errorf("nginx: %s after the switch: %+v, want %s %d %q", path, r, c.cache, c.status, c.body)
			}
		}
	}
	metrics := getBody(t, http.DefaultClient, s.http+"/metrics")
	for _, db := range []string{"kd", "md", "rd"} {
		if got := metricValue(metrics, `spangle_delta_builds_total{db="`+db+`"}`); got != 1 {
			t.Errorf("%s's v2 built as a delta %v times, want 1", db, got)
		}
	}
}

// cacheResult is what a GET through a cache showed.
type cacheResult struct {
	status                    int
	body, cache, cacheControl string
	vary                      string
}

// cacheGet reads url; cache is the X-Cache header (HIT, MISS, EXPIRED…).
func cacheGet(url string) (cacheResult, error) {
	resp, err := http.Get(url)
	if err != nil {
		return cacheResult{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return cacheResult{status: resp.StatusCode, body: string(body), cache: resp.Header.Get("X-Cache"),
		cacheControl: resp.Header.Get("Cache-Control"), vary: resp.Header.Get("Vary")}, err
}

// wantValue checks that url answers 200 with want.
func wantValue(url, want string) error {
	r, err := cacheGet(url)
	if err != nil {
		return err
	}
	if r.status != http.StatusOK || r.body != want {
		return fmt.Errorf("GET %s: %d %q (%s), want %q", url, r.status, r.body, r.cache, want)
	}
	return nil
}

// readExample returns a file of examples/edge.
func readExample(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "edge", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// startDaemon runs a cache in the foreground until the test ends, and
// prints its output if the test fails.
func startDaemon(t *testing.T, name, path string, args ...string) {
	t.Helper()
	cmd := exec.Command(path, args...)
	out := &safeBuffer{}
	cmd.Stdout, cmd.Stderr = lineWriter{out}, lineWriter{out}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(testTimeout):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, tail(out.String(), 4000))
		}
	})
}

// lineWriter feeds a safeBuffer.
type lineWriter struct{ b *safeBuffer }

func (w lineWriter) Write(p []byte) (int, error) {
	w.b.WriteLine(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
