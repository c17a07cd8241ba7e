package spangle

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/spangledb/spangle/blocks"
	"github.com/spangledb/spangle/node/source/objstore"
	"github.com/spangledb/spangle/node/source/s3"
)

// Start-up errors say what to change. A second instance on the same data
// dir or ports, or a typo in the source, is found before anything starts
// (no "spangle serving" line before it), all at once rather than one run
// at a time, and each error names the config key and the flag that set
// the value.

// preflight checks, before anything starts, what would make the start
// fail later: the data dir's lock, the ports of the embedded NATS server
// and the debug listener (probed: bound and closed), and a local source
// that does not exist while the data dir holds no version to serve (a
// warning only: the directory may be a mount still to come, listed on
// SIGHUP). The HTTP listener is bound for real by Start (bindError
// explains a failure). It returns every problem found.
func preflight(cfg Config, log *slog.Logger) []error {
	var errs []error
	if err := blocks.CheckLock(cfg.Node.DataDir); err != nil {
		if errors.Is(err, blocks.ErrLocked) {
			err = fmt.Errorf("data_dir %q (--data-dir) is in use: another spangle process holds its lock (%s); stop that process, or give this one its own data_dir",
				cfg.Node.DataDir, filepath.Join(cfg.Node.DataDir, "spangle.lock"))
		}
		errs = append(errs, err)
	}
	probe := func(addr, key string) {
		_, p, err := net.SplitHostPort(addr)
		if port, perr := strconv.Atoi(p); err != nil || perr != nil || port <= 0 {
			return // a random port, or a bad address the component reports itself
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			errs = append(errs, bindError(addr, key, err))
			return
		}
		ln.Close()
	}
	if cfg.NATS.Embedded() {
		probe(cfg.NATS.EmbeddedListen, "[nats] listen (--nats-listen)")
		if cfg.NATS.EmbeddedClusterListen != "" {
			probe(cfg.NATS.EmbeddedClusterListen, "[nats] embedded_cluster_listen")
		}
	}
	if cfg.DebugBind != "" {
		probe(cfg.DebugBind, "[debug] bind (--debug-bind)")
	}
	if dir := localSourceDir(cfg.Node.Source); dir != "" {
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) && !holdsVersions(cfg.Node.DataDir) {
			log.Warn("the source does not exist and the data dir holds no version: this node serves nothing until it does; create it, with a directory per db holding a directory per version, then send SIGHUP (or wait refresh_period), or set source / --source to the directory that has them",
				"source", cfg.Node.Source, "data_dir", cfg.Node.DataDir)
		}
	}
	return errs
}

// bindError explains a failure to listen on addr, set by key (the config
// key and the flag).
func bindError(addr, key string, err error) error {
	hint := "set another address"
	if errors.Is(err, syscall.EADDRINUSE) {
		hint = "another process listens there (is spangle already running?): stop it, or set another address"
	}
	return fmt.Errorf("%s %q: %w; %s", key, addr, err, hint)
}

// localSourceDir returns the directory of a local source root (a path or
// file:///path), "" for other sources.
func localSourceDir(root string) string {
	if root == "" || objstore.IsURL(root) || s3.IsURL(root) {
		return ""
	}
	if u, err := url.Parse(root); err == nil && len(u.Scheme) > 1 {
		if u.Scheme != "file" {
			return "" // node/source reports the scheme
		}
		return filepath.FromSlash(u.Path)
	}
	return root
}

// holdsVersions reports whether the data dir holds a db's versions.
func holdsVersions(dataDir string) bool {
	dbs, err := os.ReadDir(filepath.Join(dataDir, "dbs"))
	return err == nil && len(dbs) > 0
}
