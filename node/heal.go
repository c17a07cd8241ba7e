package node

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spangledb/spangle/blocks"
	"github.com/spangledb/spangle/node/assign"
)

// Healing (cluster mode, unless ClusterConfig.DisableHeal). sequins never
// re-replicated: a partition whose replicas died stayed short until the
// next version. Here each db has a heal loop (healLoop, one goroutine)
// that follows the View and brings the partitions of the db's active
// version back to Replication:
//
//  1. From each View snapshot it counts, per partition, the live holders
//     (nodes in the nodes bucket, not draining, whose partitions entry
//     for the version has the same partition count and partitioner); for
//     itself it counts what it holds locally, not its entry, which may
//     lag.
//  2. It remembers since when each partition has been below Replication
//     (forgotten as soon as it is not, when the active version changes,
//     and while the snapshot is stale: expiries cannot be trusted then).
//  3. Partitions short for HealAfter go to assign.Heal, which picks those
//     this node must load: the first missing nodes of the partition's
//     rendezvous order over the live node IDs, holders excluded. Every
//     node runs the same rule on the same snapshot, so the right number
//     load each partition, and no coordination is needed.
//  4. It loads them with blocks.Store.AddPartitions into the version it
//     serves (the source is read again, as the build did), then
//     heldChanged republishes the node's partitions entry, so peers count
//     the new replicas and proxy to them. The manifest lists them: a
//     restart reuses them.
//
// Bounds: one load at a time per db, and HealMaxParallel partitions at a
// time over all dbs of the node (healSlots): a load takes as many slots
// as partitions, and waits, ranked, when there are none. A failed load is
// tried again after HealAfter. A load is cancelled when the db switches
// to another version, and stopped before its version is discarded.
//
// The loop wakes on View changes, on changes of the held versions, when
// slots are freed, when its load ends, and at the next HealAfter
// deadline; it never blocks the db's loop or the read path.

// healing reports whether the node heals (cluster mode, not disabled).
func (n *Node) healing() bool { return n.clustered() && !n.cfg.Cluster.DisableHeal }

// healSlots bounds the partitions the node loads for healing at once,
// over all dbs. Safe for concurrent use.
type healSlots struct {
	mu    sync.Mutex // guards free and freed
	free  int
	freed chan struct{} // closed, and replaced, when slots are given back
}

func newHealSlots(n int) *healSlots {
	return &healSlots{free: n, freed: make(chan struct{})}
}

// available returns the free slots and a channel closed when slots are
// next given back.
func (s *healSlots) available() (int, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.free, s.freed
}

// take takes up to k slots and returns how many it took.
func (s *healSlots) take(k int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	k = min(k, s.free)
	s.free -= k
	return k
}

// give gives k slots back and wakes the waiters.
func (s *healSlots) give(k int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.free += k
	close(s.freed)
	s.freed = make(chan struct{})
}

// healJob is one heal load: partitions of one version read from the
// source in one pass.
type healJob struct {
	v      *version
	parts  []int // increasing
	cancel context.CancelFunc
	done   chan struct{} // closed when the load has ended and its results are recorded
	err    error         // the load's error; read after done
}

// healer is the state of a db's heal loop, owned by its goroutine.
type healer struct {
	d       *db
	version string            // the active version under watch
	under   map[int]time.Time // partition → since when it has been short
	job     *healJob          // the load under way, nil if none
}

// healLoop runs the db's healing (see above) until the db or the node
// shuts down; it waits for its load to end before returning. It starts
// once the node has processed its first listing (after convergence).
func (d *db) healLoop() {
	defer close(d.healDone)
	n := d.node
	select {
	case <-n.readyCh:
	case <-d.ctx.Done():
		return
	}
	h := &healer{d: d, under: map[int]time.Time{}}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		snap, viewChanged := n.cfg.Cluster.View.Cluster()
		if snap == nil {
			snap = emptyCluster
		}
		_, heldChanged := n.Held()
		_, freed := n.heal.available()
		var wake <-chan time.Time
		if wait := h.step(snap, time.Now()); wait >= 0 {
			timer.Reset(wait)
			wake = timer.C
		}
		var jobDone <-chan struct{}
		if h.job != nil {
			jobDone = h.job.done
		}
		select {
		case <-d.ctx.Done():
			if h.job != nil {
				h.job.cancel()
				<-h.job.done
				h.reap(time.Now())
			}
			return
		case <-viewChanged:
		case <-heldChanged:
		case <-freed:
		case <-jobDone:
		case <-wake:
		}
		timer.Stop()
	}
}

// step brings the healer up to date with snapshot s at now: it collects a
// finished load, tracks the short partitions of the active version and
// starts a load if this node should. It returns how long until the next
// short partition reaches HealAfter, or -1 if none is pending.
func (h *healer) step(s *ClusterSnapshot, now time.Time) time.Duration {
	d, n := h.d, h.d.node
	cfg := n.cfg.Cluster
	h.reap(now)
	active := d.active.Load()
	if h.job != nil && (active == nil || active.name != h.job.v.name) {
		h.job.cancel() // the db switched versions: heal the new one instead
	}
	if active == nil || s.Stale() {
		clear(h.under)
		return -1
	}
	if active.name != h.version {
		h.version = active.name
		clear(h.under)
	}
	if active.n == 0 {
		return -1
	}
	live, holders := h.replicas(s, active)
	states := make([]assign.PartitionState, active.n)
	var short []int // newly short
	for p, hs := range holders {
		states[p].Holders = hs
		if len(hs) >= cfg.Replication {
			delete(h.under, p)
			continue
		}
		since, ok := h.under[p]
		if !ok {
			since = now
			h.under[p] = now
			short = append(short, p)
		}
		states[p].Under = now.Sub(since)
	}
	if len(short) > 0 {
		n.log.Info("partitions under-replicated; healed after heal_after unless replicas come back",
			"db", d.name, "version", active.name, "partitions", short, "replication", cfg.Replication,
			"heal_after", cfg.HealAfter)
	}
	if h.job == nil && !n.draining.Load() {
		free, _ := n.heal.available()
		picks := assign.Heal(assign.HealInput{
			Self:          n.id,
			Live:          live,
			Replication:   cfg.Replication,
			HealAfter:     cfg.HealAfter,
			MaxConcurrent: free,
			Partitions:    states,
		})
		if k := n.heal.take(len(picks)); k > 0 {
			picks = picks[:k]
			slices.Sort(picks)
			h.start(active, picks)
		}
	}
	next := time.Duration(-1)
	for _, since := range h.under {
		if left := since.Add(cfg.HealAfter).Sub(now); left > 0 && (next < 0 || left < next) {
			next = left
		}
	}
	return next
}

// replicas returns the IDs of the live nodes and, per partition of v, the
// live nodes holding it: this node from what it holds, the others from
// their partitions entries.
func (h *healer) replicas(s *ClusterSnapshot, v *version) (live []string, holders [][]string) {
	n := h.d.node
	for _, nd := range s.Live() {
		live = append(live, nd.ID)
	}
	holders = make([][]string, v.n)
	for p := range holders {
		if v.data.Holds(p) {
			holders[p] = append(holders[p], n.id)
		}
	}
	h.d.remoteHoldings(s, v.name, v.n, v.data.Manifest().Partitioner, func(node string, p int) {
		if _, ok := slices.BinarySearch(live, node); ok && !slices.Contains(holders[p], node) {
			holders[p] = append(holders[p], node)
		}
	})
	return live, holders
}

// start runs a load of parts of v, whose slots are taken, in a goroutine
// the healer owns (it waits for job.done).
func (h *healer) start(v *version, parts []int) {
	d := h.d
	ctx, cancel := context.WithCancel(d.ctx)
	job := &healJob{v: v, parts: parts, cancel: cancel, done: make(chan struct{})}
	h.job = job
	d.healMu.Lock()
	d.healing = job
	d.healMu.Unlock()
	d.node.log.Info("healing partitions", "db", d.name, "version", v.name, "partitions", parts,
		"heal_after", d.node.cfg.Cluster.HealAfter)
	go d.runHeal(ctx, job) // owned: the healer waits for job.done
}

// reap collects the load if it has ended: a failed one's partitions wait
// HealAfter again before the next try.
func (h *healer) reap(now time.Time) {
	job := h.job
	if job == nil {
		return
	}
	select {
	case <-job.done:
	default:
		return
	}
	h.job = nil
	job.cancel()
	h.d.healMu.Lock()
	if h.d.healing == job {
		h.d.healing = nil
	}
	h.d.healMu.Unlock()
	if job.err != nil && job.v.name == h.version {
		for _, p := range job.parts {
			h.under[p] = now
		}
	}
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

// runHeal loads job's partitions into its version and records the
// outcome in the version's status, the metrics and the held versions.
func (d *db) runHeal(ctx context.Context, job *healJob) {
	n, v := d.node, job.v
	defer close(job.done)
	defer n.heal.give(len(job.parts))
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
		err = n.store.AddPartitions(ctx, v.data, spec)
	}
	job.err = err
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
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		log.Info("heal cancelled", "err", err)
		return
	default:
		n.metrics.healFailures.WithLabelValues(d.name).Add(float64(len(job.parts)))
		log.Warn("heal failed; trying again after heal_after", "err", err, "heal_after", n.cfg.Cluster.HealAfter)
		return
	}
	m := v.data.Manifest()
	n.metrics.healed.WithLabelValues(d.name).Add(float64(len(job.parts)))
	n.metrics.healLoads.WithLabelValues(d.name).Inc()
	if d.active.Load() == v {
		n.metrics.activeVersion(d.name, v.name, m.Records, m.Bytes)
	}
	n.heldChanged() // the advertiser publishes the new partitions
	log.Info("partitions healed", "seconds", elapsed.Seconds(), "held", len(m.Partitions), "of", m.NumPartitions)
}

// mergeSorted returns the sorted union of a and b, both increasing.
func mergeSorted(a, b []int) []int {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}
