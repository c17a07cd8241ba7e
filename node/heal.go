package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/spangledb/spangle/blocks"
)

// Healing: the cluster (Config.Cluster) decides which partitions of the
// active version this node should load besides those it built, because
// they stay under-replicated; LoadPartitions loads them. See package
// node/cluster for the decision.

// healJob is a LoadPartitions under way, so that discarding its version
// stops it first.
type healJob struct {
	v      *version
	cancel context.CancelFunc
	done   chan struct{} // closed when the load has ended and its results are recorded
	parts  []int
}

// LoadPartitions loads the partitions parts (increasing) of db's active
// version into this node, reading the source again as the build did, with
// blocks.Store.AddPartitions: readers never wait, and the manifest lists
// them, so a restart reuses them. The held versions change (Held), so the
// advertiser publishes them. One load per db runs at a time; it stops
// when ctx ends, when the db switches to another version, and before its
// version is discarded. Progress and failures show in the version's
// status (HealStatus).
func (n *Node) LoadPartitions(ctx context.Context, db, version string, parts []int) error {
	d := (*n.dbs.Load())[db]
	if d == nil {
		return fmt.Errorf("%w: %s", ErrUnknownDB, db)
	}
	v := d.active.Load()
	if v == nil || v.name != version {
		return fmt.Errorf("%w: %s/%s is not the active version", ErrUnknownVersion, db, version)
	}
	for _, p := range parts {
		if p < 0 || p >= v.n {
			return fmt.Errorf("node: load %s/%s: partition %d of %d", db, version, p, v.n)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(d.ctx, cancel) // the db's end, or the node's
	defer stop()
	job := &healJob{v: v, cancel: cancel, done: make(chan struct{}), parts: parts}
	defer close(job.done)
	d.healMu.Lock()
	if d.healing != nil {
		d.healMu.Unlock()
		return fmt.Errorf("node: load %s/%s: a load is under way", db, version)
	}
	d.healing = job
	d.healMu.Unlock()
	defer func() {
		d.healMu.Lock()
		d.healing = nil
		d.healMu.Unlock()
	}()
	if d.active.Load() != v { // switched meanwhile: stopHeal may have missed the job
		return fmt.Errorf("%w: %s/%s is no longer active", ErrUnknownVersion, db, version)
	}
	return d.runHeal(ctx, job)
}

// stopHeal cancels the heal load of v, if one runs, and waits for it to
// end. Called before v is closed.
func (d *db) stopHeal(v *version) {
	d.healMu.Lock()
	job := d.healing
	d.healMu.Unlock()
	if job != nil && job.v.data == v.data {
		job.cancel()
		<-job.done
	}
}

// runHeal loads job's partitions into its version.
// runHeal loads job's partitions into its version and records the
// outcome in the version's status, the metrics and the held versions.
func (d *db) runHeal(ctx context.Context, job *healJob) error {
	n, v := d.node, job.v
	inProgress := n.metrics.healing.WithLabelValues(d.name)
	inProgress.Add(float64(len(job.parts)))
	defer inProgress.Sub(float64(len(job.parts)))
	log := n.log.With("db", d.name, "version", v.name, "partitions", job.parts)

	started := time.Now()
	d.mu.Lock()
	if v.state.heal == nil {
		v.state.heal = &HealStatus{}
	}
	v.state.heal.Loading = job.parts
	v.state.heal.Progress = &BuildProgress{StartedAt: started}
	d.mu.Unlock()

	var retries atomic.Int64
	spec, total, err := d.buildSpec(ctx, v.name, &retries)
	if err == nil {
		spec.Partitions = job.parts
		spec.Progress = func(p blocks.BuildProgress) {
			bp := progressOf(p, started, &retries)
			d.mu.Lock()
			v.state.heal.Progress = &bp
			d.mu.Unlock()
		}
		err = d.healFromPeers(ctx, v, spec) // peercopy.go: those peers give
		if rest := missing(v.data, job.parts); len(rest) > 0 && ctx.Err() == nil {
			if err != nil && err != errNoHolder { // a copy was tried
				log.Warn("heal: peer copy failed, loading from the source", "err", err)
			}
			if err == nil { // some were copied
				n.metrics.peerCopyRest.WithLabelValues(d.name).Add(float64(len(rest)))
				log.Warn("heal: partitions no peer gave are loaded from the source", "partitions", rest)
			}
			spec.Fetch, spec.Partitions = nil, rest
			err = n.store.AddPartitions(ctx, v.data, spec)
		}
	}
	elapsed := time.Since(started)

	d.mu.Lock()
	hs := v.state.heal
	hs.Loading = nil
	if err == nil {
		hs.Healed = mergeSorted(hs.Healed, job.parts)
		hs.Loads++
		hs.Progress.FilesDone, hs.Progress.FilesTotal = len(spec.Files), len(spec.Files)
		hs.Progress.BytesRead, hs.Progress.BytesTotal = total, total
		hs.Progress.Percent, hs.Progress.DurationSec = 100, elapsed.Seconds()
		v.state.partitions = append([]int(nil), v.data.Manifest().Partitions...)
	} else if ctx.Err() == nil {
		hs.Failures += len(job.parts)
		hs.LastError = err.Error()
	}
	d.mu.Unlock()

	switch {
	case err == nil:
		// The answers cached from peers for these partitions would go on
		// being served as proxied (and cost a peer's round trip each time
		// they are missed again): they are read here from now on.
		n.cache.dropProxied(v)
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		log.Info("heal cancelled", "err", err)
		return err
	default:
		n.metrics.healFailures.WithLabelValues(d.name).Add(float64(len(job.parts)))
		log.Warn("heal failed", "err", err)
		return err
	}
	m := v.data.Manifest()
	n.metrics.healed.WithLabelValues(d.name).Add(float64(len(job.parts)))
	n.metrics.healLoads.WithLabelValues(d.name).Inc()
	if d.active.Load() == v {
		n.metrics.activeVersion(d.name, v.name, v.data)
	}
	n.heldChanged() // the advertiser publishes the new partitions
	log.Info("partitions healed", "seconds", elapsed.Seconds(), "held", len(m.Partitions), "of", m.NumPartitions)
	return nil
}

// mergeSorted returns the sorted union of a and b, both increasing.
func mergeSorted(a, b []int) []int {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}
