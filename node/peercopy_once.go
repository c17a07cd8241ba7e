package node

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spangledb/spangle/blocks"
	"github.com/spangledb/spangle/node/advert"
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
	// BuilderFailed returns why v's builder failed to build it, as its
	// node entry says (advert.Node.BuildFailed), and whether it did: its
	// peers then build their partitions themselves. An entry is not
	// trusted: a forged failure makes nodes build from the source, as
	// without build once.
	BuilderFailed(v VersionInfo) (reason string, failed bool)
}

// Outcomes of spangle_build_once_total.
const (
	onceBuilt    = "built"
	onceCopied   = "copied"
	onceFailed   = "failed"
	onceFallback = "fallback"
)

// maxBuildFailedLen bounds the reason of a failed build in the node
// entry (advert's bound on its text fields is 512 bytes).
const maxBuildFailedLen = 400

// setBuildFailed records that version name of d failed to build here,
// and why, for the node entry (buildFailures): peers waiting for this
// node to build it build theirs.
func (d *db) setBuildFailed(name string, err error) {
	reason := err.Error()
	if len(reason) > maxBuildFailedLen {
		reason = strings.ToValidUTF8(reason[:maxBuildFailedLen], "")
	}
	d.mu.Lock()
	d.buildFailed = advert.BuildFailure{Version: name, Reason: reason}
	d.mu.Unlock()
	d.node.nodeEntryChanged()
}

// clearBuildFailed forgets the failed build of version name of d, when
// it is the one recorded: this node tries it again as its builder.
func (d *db) clearBuildFailed(name string) {
	d.mu.Lock()
	cleared := d.buildFailed.Version == name
	if cleared {
		d.buildFailed = advert.BuildFailure{}
	}
	d.mu.Unlock()
	if cleared {
		d.node.nodeEntryChanged()
	}
}

// buildFailures returns, by db, the last version whose build failed here
// (setBuildFailed), for the node entry.
func (n *Node) buildFailures() map[string]advert.BuildFailure {
	dbs := n.dbs.Load()
	if dbs == nil {
		return nil
	}
	var out map[string]advert.BuildFailure
	for name, d := range *dbs {
		d.mu.Lock()
		f := d.buildFailed
		d.mu.Unlock()
		if f.Version == "" {
			continue
		}
		if out == nil {
			out = map[string]advert.BuildFailure{}
		}
		out[name] = f
	}
	return out
}

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
// or nil, nil: the caller builds from the source. A version returned may
// lack partitions no peer gave: the caller builds them (buildRest).
func (d *db) fromPeers(ctx context.Context, spec blocks.BuildSpec, name string, n int, assigned []int, total int64) (*blocks.Version, error) {
	if covered(d.holders(name, n), assigned) {
		return d.copySome(ctx, name, n, assigned) // peercopy_rest.go
	}
	bv, err := d.buildOnce(ctx, spec, name, n, assigned, total)
	if err != errNoHolder {
		return bv, err
	}
	// No build once, or it fell back: what peers hold is copied, the
	// rest built from the source.
	return d.copySome(ctx, name, n, assigned)
}

// buildOnce is called when some partition assigned to this node
// (assigned, of n) of a new version has no holder. When this node is the
// version's builder it builds every partition into the staging store
// and takes its own from there (buildStaged); otherwise it waits for the
// builder's partitions entry and copies its partitions from the builder
// (those it cannot copy are left to buildRest). It returns errNoHolder
// (the caller copies what peers hold and builds the rest from the
// source) when build once is off, the version is smaller than
// BuildOnceMinBytes, this node is the builder and failed (it says so in
// its node entry), the builder failed to build it (BuilderFailed) or has
// not published within PeerWait; nil, nil (the caller builds every
// partition from the source) when no partition could be copied from the
// builder. A builder that leaves the view (shut down, or its node entry
// expired: killed) is replaced by the next at once.
func (d *db) buildOnce(ctx context.Context, spec blocks.BuildSpec, name string, n int, assigned []int, total int64) (*blocks.Version, error) {
	nd := d.node
	bo, ok := nd.cfg.Cluster.(BuildOnce)
	pf, ok2 := nd.cfg.Cluster.(PeerFiles)
	if !ok || !ok2 || !nd.clustered() || len(assigned) == 0 || total < bo.BuildOnceMinBytes() {
		return nil, errNoHolder
	}
	vi := VersionInfo{DB: d.name, Version: name, NumPartitions: n, Partitioner: d.partitioner.Identity()}
	log := nd.log.With("db", d.name, "version", name)
	outcome := nd.metrics.buildOnce
	defer d.setWaitingFor(name, "")
	fallback := func(msg string, args ...any) (*blocks.Version, error) {
		log.Warn("build once: "+msg+"; building this node's partitions from the source", args...)
		outcome.WithLabelValues(d.name, onceFallback).Inc()
		return nil, errNoHolder
	}
	failed := func(err error) (*blocks.Version, error) {
		// Said in the node entry: the peers waiting build theirs now.
		d.setBuildFailed(name, err)
		outcome.WithLabelValues(d.name, onceFailed).Inc()
		log.Warn("build once: this node, the version's builder, failed to build it; its peers build their own partitions", "err", err)
		return nil, errNoHolder
	}
	var timer *time.Timer
	var waitingFor string // the builder timer waits for
	for {
		changed := nd.cfg.Cluster.Changed()
		builder, self, ok := bo.VersionBuilder(vi)
		if !ok {
			return nil, errNoHolder
		}
		if self {
			d.clearBuildFailed(name) // tried again
			// Every partition staged, and its own copied from there.
			if err := d.checkSpace(total, n+len(assigned), n); err != nil {
				return failed(fmt.Errorf("every partition does not fit here: %w", err))
			}
			bv, err := d.buildStaged(ctx, spec, vi, assigned, bo.PeerWait())
			if err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				return failed(err)
			}
			outcome.WithLabelValues(d.name, onceBuilt).Inc()
			return bv, nil
		}
		if reason, ok := bo.BuilderFailed(vi); ok {
			return fallback("the builder failed to build the version", "builder", builder, "reason", reason)
		}
		holders := pf.FileHolders(vi)
		if published(holders, builder) || covered(holders, assigned) {
			for _, p := range assigned { // the builder has every partition
				if !slices.Contains(holders[p], builder) {
					holders[p] = append(holders[p], builder)
				}
			}
			d.setWaitingFor(name, "")
			bv, err := d.copyFrom(ctx, name, n, assigned, holders, true)
			if err == nil {
				outcome.WithLabelValues(d.name, onceCopied).Inc()
				return bv, nil
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			log.Warn("build once: the copy from the builder failed", "builder", builder, "err", err)
			outcome.WithLabelValues(d.name, onceFallback).Inc()
			return nil, nil // the caller builds every partition from the source
		}
		if builder != waitingFor {
			// The first builder, or the next after one left the view
			// (killed, or shut down): it has build_once_wait of its own.
			wait := bo.PeerWait()
			log.Info("build once: waiting for the version's builder", "builder", builder, "build_once_wait", wait)
			if timer == nil {
				timer = time.NewTimer(wait)
				defer timer.Stop()
			} else {
				timer.Reset(wait)
			}
			waitingFor = builder
		}
		d.setWaitingFor(name, builder)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
			return fallback("the builder did not publish the version within build_once_wait", "builder", builder)
		case <-changed:
		}
	}
}

// setWaitingFor shows in version name's build status the builder this
// node waits for ("": none).
func (d *db) setWaitingFor(name, builder string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.versions[name]
	if s == nil || s.progress == nil || s.progress.WaitingForBuilder == builder {
		return
	}
	p := *s.progress
	p.WaitingForBuilder = builder
	s.progress = &p
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
