package node

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/spangledb/spangle/blocks"
)

// BuildOnce is what a node needs of its cluster to build each new
// version once per cluster (issue 35): one node, the version's builder,
// builds every partition from the source; the others wait for its
// partitions entry and copy theirs from it (PeerFiles). node/cluster's
// Cluster implements it; without it every node builds its own
// partitions.
type BuildOnce interface {
	// VersionBuilder returns the address of v's builder and whether it is
	// this node; ok is false when build once is off (or no node can be
	// the builder): every node builds the partitions it is assigned.
	VersionBuilder(v VersionInfo) (builder string, self, ok bool)
	// PeerWait is how long a node waits for the builder's partitions, or
	// for a busy peer to send a file, before it builds from the source;
	// and how long the builder keeps the partitions it is not assigned
	// for its peers to copy, at most.
	PeerWait() time.Duration
	// BuildOnceMinBytes is the smallest version (source bytes) built
	// once; smaller ones are built by every node.
	BuildOnceMinBytes() int64
}

// Outcomes of spangle_build_once_total.
const (
	onceBuilt    = "built"
	onceCopied   = "copied"
	onceFallback = "fallback"
)

// stagingDir is where, under the data dir, the builder of a version
// builds every partition (a blocks.Store of its own): the node's version
// takes the partitions it is assigned from there, and peers copy the
// others, until every partition has its replicas (or PeerWait). Nothing
// there survives a restart.
const stagingDir = "staging"

// stagedBuilds are the versions this node built in full for its peers.
type stagedBuilds struct {
	mu       sync.Mutex
	store    *blocks.Store // opened at the first build; nil after release
	versions map[string]*blocks.Version
}

func stagedKey(db, version string) string { return db + "\x00" + version }

// staged returns db's version built in full here for the peers, or nil.
func (n *Node) staged(db, version string) *blocks.Version {
	s := &n.staging
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.versions[stagedKey(db, version)]
}

// stagingStore returns the staging store, opening it (emptied) at the
// first call.
func (n *Node) stagingStore() (*blocks.Store, error) {
	s := &n.staging
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.store != nil {
		return s.store, nil
	}
	dir := filepath.Join(n.cfg.DataDir, stagingDir)
	if err := os.RemoveAll(dir); err != nil { // a previous run's
		return nil, err
	}
	st, err := blocks.OpenStore(dir, blocks.Options{Logger: n.log, MemoryBudget: n.cfg.MemoryBudget, MaxParallelLoads: n.cfg.MaxParallelLoads})
	if err != nil {
		return nil, err
	}
	s.store, s.versions = st, map[string]*blocks.Version{}
	return st, nil
}

// unstage closes and removes db's staged version.
func (n *Node) unstage(db, version string) {
	s := &n.staging
	s.mu.Lock()
	sv := s.versions[stagedKey(db, version)]
	delete(s.versions, stagedKey(db, version))
	st := s.store
	s.mu.Unlock()
	if sv == nil {
		return
	}
	_ = sv.Close()
	if err := st.Remove(db, version); err != nil {
		n.log.Warn("build once: removing the staged version", "db", db, "version", version, "err", err)
	}
}

// releaseStaging closes the staged versions and the staging store and
// removes them: at the node's release, its goroutines returned.
func (n *Node) releaseStaging() error {
	s := &n.staging
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.store == nil {
		return nil
	}
	for _, sv := range s.versions {
		_ = sv.Close()
	}
	err := s.store.Close()
	s.store, s.versions = nil, nil
	if rerr := os.RemoveAll(filepath.Join(n.cfg.DataDir, stagingDir)); err == nil {
		err = rerr
	}
	return err
}

// fromPeers makes version name of d (n partitions, assigned to this
// node) from its peers' files, or as the version's builder: it returns
// the version, or nil and the error of a copy that was tried and failed,
// and the caller builds from the source.
func (d *db) fromPeers(ctx context.Context, spec blocks.BuildSpec, name string, n int, assigned []int, total int64) (*blocks.Version, error) {
	bv, err := d.copyFromPeers(ctx, name, n, assigned) // peercopy.go
	if err != errNoHolder {
		return bv, err // copied, or a copy was tried
	}
	return d.buildOnce(ctx, spec, name, n, assigned, total)
}

// buildOnce is called when no peer holds the partitions assigned to this
// node (assigned, of n) of a new version. When this node is the version's
// builder it builds every partition into the staging store and takes its
// own from there (buildStaged); otherwise it waits for the builder's
// partitions entry and copies its partitions from the builder. It
// returns nil, nil (the caller builds assigned from the source) when
// build once is off, the version is smaller than BuildOnceMinBytes, the
// builder has not published within PeerWait, or a step failed. A builder that leaves the view is replaced by the next, at
// the next change of the view.
func (d *db) buildOnce(ctx context.Context, spec blocks.BuildSpec, name string, n int, assigned []int, total int64) (*blocks.Version, error) {
	nd := d.node
	bo, ok := nd.cfg.Cluster.(BuildOnce)
	pf, ok2 := nd.cfg.Cluster.(PeerFiles)
	if !ok || !ok2 || !nd.clustered() || len(assigned) == 0 || total < bo.BuildOnceMinBytes() {
		return nil, nil
	}
	vi := VersionInfo{DB: d.name, Version: name, NumPartitions: n, Partitioner: d.partitioner.Identity()}
	log := nd.log.With("db", d.name, "version", name)
	outcome := nd.metrics.buildOnce
	fallback := func(msg string, args ...any) (*blocks.Version, error) {
		log.Warn("build once: "+msg+"; building this node's partitions from the source", args...)
		outcome.WithLabelValues(d.name, onceFallback).Inc()
		return nil, nil
	}
	var timer *time.Timer
	for {
		changed := nd.cfg.Cluster.Changed()
		builder, self, ok := bo.VersionBuilder(vi)
		if !ok {
			return nil, nil
		}
		if self {
			// Every partition staged, and its own copied from there.
			if err := d.checkSpace(total, n+len(assigned), n); err != nil {
				return fallback("every partition does not fit here", "err", err)
			}
			bv, err := d.buildStaged(ctx, spec, vi, assigned, bo.PeerWait())
			if err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				return fallback("the build of every partition failed", "err", err)
			}
			outcome.WithLabelValues(d.name, onceBuilt).Inc()
			return bv, nil
		}
		holders := pf.FileHolders(vi)
		if published(holders, builder) || covered(holders, assigned) {
			for _, p := range assigned { // the builder has every partition
				if !slices.Contains(holders[p], builder) {
					holders[p] = append(holders[p], builder)
				}
			}
			bv, err := d.copyFrom(ctx, name, n, assigned, holders)
			if err == nil {
				outcome.WithLabelValues(d.name, onceCopied).Inc()
				return bv, nil
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return fallback("the copy from the builder failed", "builder", builder, "err", err)
		}
		if timer == nil {
			wait := bo.PeerWait()
			log.Info("build once: waiting for the version's builder", "builder", builder, "build_once_wait", wait)
			timer = time.NewTimer(wait)
			defer timer.Stop()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
			return fallback("the builder did not publish the version within build_once_wait", "builder", builder)
		case <-changed:
		}
	}
}

// buildStaged builds every partition of vi into the staging store, where
// peers copy them (OpenPartFile, PartManifest), and returns the version
// of this node's partitions (assigned), taken from there. The staged
// version is removed once every partition has Replication holders in
// the view, after wait at most.
func (d *db) buildStaged(ctx context.Context, spec blocks.BuildSpec, vi VersionInfo, assigned []int, wait time.Duration) (*blocks.Version, error) {
	nd := d.node
	st, err := nd.stagingStore()
	if err != nil {
		return nil, err
	}
	nd.log.Info("build once: this node builds every partition; its peers copy theirs", "db", vi.DB, "version", vi.Version)
	spec.Partitions = nil // every one
	sv, err := st.Build(ctx, spec)
	if err != nil {
		return nil, err
	}
	nd.staging.mu.Lock()
	if nd.staging.store != st { // released meanwhile
		nd.staging.mu.Unlock()
		_ = sv.Close()
		return nil, context.Canceled
	}
	nd.staging.versions[stagedKey(vi.DB, vi.Version)] = sv
	nd.staging.mu.Unlock()
	bv, err := nd.store.Import(ctx, blocks.ImportSpec{DB: vi.DB, Version: vi.Version, From: sv.Manifest(), Partitions: assigned,
		Fetch: func(_ context.Context, p int, f *os.File) (blocks.PartitionInfo, error) {
			src, pi, err := sv.OpenPartitionFile(p)
			if err != nil {
				return pi, err
			}
			defer src.Close()
			_, err = io.Copy(f, src) // copy_file_range on Linux
			return pi, err
		}})
	if err != nil {
		nd.unstage(vi.DB, vi.Version)
		return nil, err
	}
	nd.wg.Add(1)
	go func() {
		defer nd.wg.Done()
		d.unstageWhenCopied(vi, assigned, wait)
	}()
	return bv, nil
}

// unstageWhenCopied removes the staged version vi once every partition
// has Replication holders (this node's assigned ones counted), after wait,
// or at the node's shutdown.
func (d *db) unstageWhenCopied(vi VersionInfo, assigned []int, wait time.Duration) {
	nd := d.node
	defer nd.unstage(vi.DB, vi.Version)
	pf, _ := nd.cfg.Cluster.(PeerFiles)
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		changed := nd.cfg.Cluster.Changed()
		holders := pf.FileHolders(vi)
		done := true
		for p := range vi.NumPartitions {
			have := len(holders[p])
			if slices.Contains(assigned, p) {
				have++
			}
			if have < nd.cfg.Cluster.Replication() {
				done = false
				break
			}
		}
		if done {
			return
		}
		select {
		case <-nd.ctx.Done():
			return
		case <-t.C:
			nd.log.Info("build once: staged partitions removed before every peer copied them", "db", vi.DB, "version", vi.Version)
			return
		case <-changed:
		}
	}
}

// published reports whether the builder's address holds any partition.
func published(holders map[int][]string, builder string) bool {
	for _, hs := range holders {
		if slices.Contains(hs, builder) {
			return true
		}
	}
	return false
}

// covered reports whether every partition of parts has a holder.
func covered(holders map[int][]string, parts []int) bool {
	for _, p := range parts {
		if len(holders[p]) == 0 {
			return false
		}
	}
	return true
}
