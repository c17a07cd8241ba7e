package cluster

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/assign"
)

// Healing (cluster mode, unless Config.DisableHeal). sequins never
// re-replicated: a partition whose replicas died stayed short until the
// next version. Here the heal loop (healLoop, one goroutine per node)
// follows the View and brings the partitions of each db's active
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
//  4. The node loads them (node.Node.LoadPartitions) into the version it
//     serves, reading the source again as the build did; its held
//     versions change, so its partitions entry is written again, and
//     peers count the new replicas and proxy to them. The manifest lists
//     them: a restart reuses them.
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

// healJob is a load under way.
type healJob struct {
	version string
	parts   []int // increasing
	cancel  context.CancelFunc
	done    chan struct{} // closed when the load has ended
	err     error         // the load's error; read after done
}

// healer is the heal state of one db: the active version it watches and
// since when each of its partitions has been short.
type healer struct {
	version string            // the active version under watch
	under   map[int]time.Time // partition → since when it has been short
	job     *healJob          // the load under way, nil if none
}

// healLoop runs until Shutdown, once the node has loaded what it found at
// start.
func (c *Cluster) healLoop() {
	select {
	case <-c.n.Loaded():
	case <-c.ctx.Done():
		return
	}
	healers := map[string]*healer{}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		snap, viewChanged := c.cfg.View.Cluster()
		if snap == nil {
			snap = emptySnapshot
		}
		held, heldChanged := c.n.Held()
		_, freed := c.slots.available()
		var wake <-chan time.Time
		if wait := c.healStep(healers, snap, held, time.Now()); wait >= 0 {
			timer.Reset(wait)
			wake = timer.C
		}
		select {
		case <-c.ctx.Done():
			for _, h := range healers {
				if h.job != nil {
					h.job.cancel()
					<-h.job.done
				}
			}
			return
		case <-viewChanged:
		case <-heldChanged:
		case <-freed:
		case <-c.jobDone:
		case <-wake:
		}
		timer.Stop()
	}
}

// healStep runs one step for every db with an active version, and returns
// how long until the next HealAfter deadline (negative: none).
func (c *Cluster) healStep(healers map[string]*healer, s *Snapshot, held []node.HeldVersion, now time.Time) time.Duration {
	active := map[string]node.HeldVersion{}
	for _, h := range held {
		if h.Active {
			active[h.DB] = h
		}
	}
	next := time.Duration(-1)
	for db, h := range healers {
		if _, ok := active[db]; !ok {
			h.reap(now)
			if h.job != nil {
				h.job.cancel() // the db went, or has no active version: reaped next time
				continue
			}
			delete(healers, db)
		}
	}
	for db, v := range active {
		h := healers[db]
		if h == nil {
			h = &healer{under: map[int]time.Time{}}
			healers[db] = h
		}
		if wait := c.heal(h, s, v, now); wait >= 0 && (next < 0 || wait < next) {
			next = wait
		}
	}
	return next
}

// heal steps db's healer: it counts the replicas of the active version v
// in s, starts a load of the partitions this node must heal, and returns
// how long until the next HealAfter deadline (negative: none).
func (c *Cluster) heal(h *healer, s *Snapshot, v node.HeldVersion, now time.Time) time.Duration {
	cfg := c.cfg
	h.reap(now)
	if h.job != nil && h.job.version != v.Version {
		h.job.cancel() // the db switched versions: heal the new one instead
	}
	if s.Stale() {
		clear(h.under)
		return -1
	}
	if v.Version != h.version {
		h.version = v.Version
		clear(h.under)
	}
	if v.NumPartitions == 0 {
		return -1
	}
	live, holders := c.replicas(s, v)
	states := make([]assign.PartitionState, v.NumPartitions)
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
		c.log.Info("partitions under-replicated; healed after heal_after unless replicas come back",
			"db", v.DB, "version", v.Version, "partitions", short, "replication", cfg.Replication,
			"heal_after", cfg.HealAfter)
	}
	if h.job == nil && !c.n.Draining() {
		free, _ := c.slots.available()
		picks := assign.Heal(assign.HealInput{
			Self:          c.n.ID(),
			Live:          live,
			Replication:   cfg.Replication,
			HealAfter:     cfg.HealAfter,
			MaxConcurrent: free,
			Partitions:    states,
		})
		if k := c.slots.take(len(picks)); k > 0 {
			picks = picks[:k]
			slices.Sort(picks)
			h.job = c.startHeal(v, picks)
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

// replicas returns the live node IDs (sorted) and, per partition of v,
// the live nodes holding it: this node by what it holds, the others by
// their partitions entries.
func (c *Cluster) replicas(s *Snapshot, v node.HeldVersion) (live []string, holders [][]string) {
	for _, nd := range s.Live() {
		live = append(live, nd.ID)
	}
	holders = make([][]string, v.NumPartitions)
	self := c.n.ID()
	for _, p := range v.Partitions {
		if p >= 0 && p < v.NumPartitions {
			holders[p] = append(holders[p], self)
		}
	}
	info := node.VersionInfo{DB: v.DB, Version: v.Version, NumPartitions: v.NumPartitions, Partitioner: v.Partitioner}
	c.remoteHoldings(s, info, func(id string, p int) {
		if _, ok := slices.BinarySearch(live, id); ok && !slices.Contains(holders[p], id) {
			holders[p] = append(holders[p], id)
		}
	})
	return live, holders
}

// startHeal starts loading parts of v, whose slots are taken; c.jobDone
// gets a signal when it ends.
func (c *Cluster) startHeal(v node.HeldVersion, parts []int) *healJob {
	ctx, cancel := context.WithCancel(c.ctx)
	job := &healJob{version: v.Version, parts: parts, cancel: cancel, done: make(chan struct{})}
	c.log.Info("healing partitions", "db", v.DB, "version", v.Version, "partitions", parts,
		"heal_after", c.cfg.HealAfter)
	c.wg.Add(1)
	go func() { // owned: the loop waits for job.done
		defer c.wg.Done()
		defer func() {
			select {
			case c.jobDone <- struct{}{}:
			default:
			}
		}()
		defer close(job.done)
		defer c.slots.give(len(parts))
		job.err = c.n.LoadPartitions(ctx, v.DB, v.Version, parts)
		if job.err != nil && ctx.Err() == nil {
			c.log.Warn("heal failed; trying again after heal_after", "db", v.DB, "version", v.Version,
				"partitions", parts, "err", job.err, "heal_after", c.cfg.HealAfter)
		}
	}()
	return job
}

// reap clears a job that has ended; the partitions of a failed one wait
// HealAfter again.
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
	if job.err != nil && job.version == h.version {
		for _, p := range job.parts {
			h.under[p] = now
		}
	}
}
