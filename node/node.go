package node

import (
	"context"
	"errors"
	"fmt"
	"github.com/spangledb/spangle/node/source"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spangledb/spangle/blocks"
)

// Node is one spangle process's data plane: it finds versions in its source,
// builds the partitions it holds, switches to new versions atomically and
// answers lookups. It is safe for concurrent use.
type Node struct {
	cfg     Config
	log     *slog.Logger
	source  source.Source
	metrics *metrics
	dl      *source.Downloads // source reads of builds: limits, retries, metrics

	// Set by Start.
	store *blocks.Store
	ctx   context.Context // cancelled by Shutdown
	stop  context.CancelFunc

	// dbs is the read path's view: a copy-on-write map, replaced whole by
	// the refresh loop.
	dbs atomic.Pointer[map[string]*db]

	// refreshCh wakes the refresh loop (Refresh, Announce); buffered 1.
	// forceRefresh says that a wake-up asked for a forced refresh: a flag
	// apart, so that a SIGHUP is not lost behind a queued announcement.
	refreshCh    chan struct{}
	forceRefresh atomic.Bool
	// listed is set by the first successful listing of the source's dbs;
	// sourceErr holds why the last one failed ("" after a success).
	listed    atomic.Bool
	sourceErr atomic.Pointer[string]
	readyCh   chan struct{}
	// dbsMu serialises the changes of dbs after Start: refresh and
	// RemoveDB. removeAt is when the next db missing from the source is
	// due for removal (missing.go), in Unix nanoseconds; 0: none.
	dbsMu    sync.Mutex
	removeAt atomic.Int64
	wg       sync.WaitGroup // every goroutine the node starts
	staging  stagedBuilds   // versions built in full for the peers (build once, peercopy_once.go)
	mem      *memoryRelease // the heap builds leave, back to the OS (memory.go)

	cursorKey []byte         // Config.CursorKey; nil: cursorDefaultKey
	positions *listPositions // listings' positions between pages
	cache     *answerCache   // answers of hot keys (cache.go); nil when off

	id  string      // set by Start: Config.NodeID or <data_dir>/node_id
	adv *advertiser // set by Start when Config.Advertiser is set
	// pins holds the db pins (pin.go), kept in <data_dir>/pins.json.
	pinsMu sync.Mutex
	pins   pinSet
	// entryChanged is signalled (never blocking; buffered 1) when what
	// the node entry carries besides the node's state changes (a db's
	// answer to its pin, a failed build): the advertiser writes it again
	// (nodeEntryChanged).
	entryChanged chan struct{}
	// refusedMu serialises the updates of <data_dir>/refused.json
	// (refused.go).
	refusedMu sync.Mutex

	heldMu sync.Mutex // serialises heldChanged
	held   atomic.Pointer[heldView]

	drainOnce sync.Once
	drainCh   chan struct{} // closed by Drain
	draining  atomic.Bool

	startOnce    sync.Once
	startErr     error
	shutdownOnce sync.Once
	shutdownDone chan struct{} // closed once Shutdown has released everything
	shutdownErr  error         // the release's; read after shutdownDone
}

// New validates cfg and returns a node; it starts nothing.
func New(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDerived()
	var err error
	src := cfg.OpenedSource
	if src == nil {
		if src, err = source.Open(cfg.Source, cfg.AllowExternalSymlinks); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrConfig, err)
		}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	n := &Node{
		cfg:     cfg,
		log:     log,
		source:  src,
		metrics: newMetrics(cfg.Registerer),
		dl: source.NewDownloads(source.DownloadConfig{
			Retries:      cfg.DownloadRetries,
			Backoff:      cfg.DownloadBackoff,
			BackoffMax:   cfg.DownloadBackoffMax,
			MaxBandwidth: cfg.MaxDownloadBandwidth,
			Logger:       log,
			Registerer:   cfg.Registerer,
		}),
		refreshCh: make(chan struct{}, 1),
		readyCh:   make(chan struct{}),
		drainCh:   make(chan struct{}),

		entryChanged: make(chan struct{}, 1),
	}
	if cfg.CursorKey != "" {
		n.cursorKey = []byte(cfg.CursorKey)
	}
	n.mem = newMemoryRelease(n.metrics.memRelease)
	n.positions = newListPositions(int(cfg.ListPositionBytes))
	if n.cache, err = newAnswerCache(cfg.HotCacheBytes); err != nil {
		return nil, fmt.Errorf("%w: hot cache: %v", ErrConfig, err)
	}
	empty := map[string]*db{}
	n.dbs.Store(&empty)
	n.held.Store(newHeldView(nil))
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(newStatusCollector(n))
		cfg.Registerer.MustRegister(n.cache.collectors()...)
	}
	return n, nil
}

// Start opens the data dir (taking its lock), serves the complete versions
// already on disk at once, and starts the refresh loop, which lists the
// source and builds new versions in the background. Loaded is closed once
// every db found by the first listing has been processed.
func (n *Node) Start() error {
	n.startOnce.Do(func() { n.startErr = n.start() })
	return n.startErr
}

func (n *Node) start() error {
	store, err := blocks.OpenStore(n.cfg.DataDir, blocks.Options{
		Logger:           n.log,
		MemoryBudget:     n.cfg.MemoryBudget,
		MaxParallelLoads: n.cfg.MaxParallelLoads,
		DeltaKeys:        n.cfg.ChangedKeys, // a delta's changed keys, without a diff (checks.go)
	})
	if err != nil {
		return err
	}
	n.store = store
	n.id = n.cfg.NodeID
	if n.id == "" {
		if n.id, err = loadNodeID(n.cfg.DataDir); err != nil {
			store.Close()
			return err
		}
	}
	n.ctx, n.stop = context.WithCancel(context.Background())
	if err := n.loadPins(); err != nil {
		store.Close()
		return err
	}
	if err := n.reuseLocalVersions(); err != nil {
		store.Close()
		return err
	}
	if n.clustered() {
		n.cfg.Cluster.Join(n) // before the refresh loop asks it to Converge
	}
	if n.cfg.Advertiser != nil {
		n.adv = newAdvertiser(n)
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.adv.run(n.ctx)
		}()
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.mem.run(n.ctx)
	}()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.refreshLoop()
	}()
	if n.clustered() {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.clusterLoop()
		}()
	}
	return nil
}

// reuseLocalVersions serves the newest complete version of each db found
// on disk, as a restart should, and deletes the older ones.
func (n *Node) reuseLocalVersions() error {
	manifests, err := n.store.Versions()
	if err != nil {
		return err
	}
	// The newest version of each db, or its pinned one when kept here. A
	// manual db without a pin activates nothing: its newest version waits,
	// pending, for an activation.
	// A version its guards refused (refused.go) is not taken, unless
	// pinned: it is held again, refused, beside the one served.
	newest := map[string]*blocks.Manifest{}
	waiting := map[string]bool{}
	refusals := n.loadRefusals()
	refused := map[string]*blocks.Manifest{}
	for _, m := range manifests {
		pin := n.pinOf(m.DB)
		if pin.IsZero() && n.cfg.dbConfig(m.DB).Activation == ActivationManual {
			waiting[m.DB] = true
		}
		if refusals[m.DB][m.Version] != "" && !(pin.Force && m.Version == pin.Version) {
			if cur := refused[m.DB]; cur == nil || m.Version > cur.Version {
				refused[m.DB] = m
			}
			continue
		}
		if cur := newest[m.DB]; cur == nil || m.Version > cur.Version && cur.Version != pin.Version ||
			m.Version == pin.Version {
			newest[m.DB] = m
		}
	}
	for db, m := range refused {
		if cur := newest[db]; cur != nil && m.Version < cur.Version {
			delete(refused, db) // a newer version replaced it
		}
	}
	for _, m := range manifests {
		if newest[m.DB] != m && refused[m.DB] != m {
			n.removeVersionFiles(m.DB, m.Version)
			if refusals[m.DB][m.Version] != "" {
				n.keepRefusal(m.DB, m.Version, "")
			}
		}
	}
	names := map[string]bool{}
	for db := range newest {
		names[db] = true
	}
	for db := range refused {
		names[db] = true
	}
	dbs := map[string]*db{}
	for name := range names {
		d, err := n.newDB(name)
		if err != nil {
			// Its data stays on disk: the refresh loop tries the db again.
			n.log.Error("cannot set up db; not serving it", "db", name, "err", err)
			continue
		}
		dbs[name] = d
		if m := newest[name]; m != nil {
			n.reuseVersion(d, m, waiting[name])
		}
		if m := refused[name]; m != nil {
			n.reuseVersion(d, m, true)
		}
	}
	for _, d := range dbs {
		n.startDB(d)
	}
	n.dbs.Store(&dbs)
	n.heldChanged()
	return nil
}

// reuseVersion serves m, a complete version of d found on disk: active,
// or pending when pending is set (a manual db's, or a refused one's:
// checked again, it stays refused unless it passes now). A version that cannot
// be reopened, or was built with another partitioner, is removed: the
// refresh loop builds it again.
func (n *Node) reuseVersion(d *db, m *blocks.Manifest, pending bool) {
	name := d.name
	if m.Partitioner != d.partitioner.Identity() {
		n.log.Info("local version was built with another partitioner; rebuilding", "db", name, "version", m.Version,
			"built_with", m.Partitioner, "configured", d.partitioner.Identity())
		n.removeVersionFiles(m.DB, m.Version)
		return
	}
	bv, err := n.store.Open(m.DB, m.Version)
	if err != nil {
		if errors.Is(err, blocks.ErrCorrupt) {
			n.metrics.corrupt.WithLabelValues(name, "open").Inc()
		}
		n.log.Warn("cannot reopen local version; rebuilding", "db", name, "version", m.Version, "err", err)
		n.removeVersionFiles(m.DB, m.Version)
		return
	}
	state := d.newVersionState(m.Version, n.source.Path(m.DB, m.Version))
	if pending {
		if why := n.loadRefusals()[name][m.Version]; why != "" {
			// Checked again, against the version reused: guards
			// relaxed since (a config change, a restart) let it go.
			if now, err := d.checkVersion(m.Version, bv); err == nil {
				why = now
			}
			if why == "" {
				n.keepRefusal(name, m.Version, "")
				n.log.Info("a refused local version passes its guards now", "db", name, "version", m.Version)
			} else {
				state.refused = why
				state.refusal.Store(&why)
			}
		}
		d.setPending(state, bv)
		n.log.Info("local version waits for its activation", "db", name, "version", m.Version, "records", m.Records, "refused", state.refused)
		return
	}
	d.activate(state, bv)
	n.log.Info("serving local version", "db", name, "version", m.Version, "records", m.Records)
}

func (n *Node) removeVersionFiles(db, version string) {
	if err := n.store.Remove(db, version); err != nil {
		n.log.Warn("cannot remove local version", "db", db, "version", version, "err", err)
	}
}

// Loaded is closed once the node has processed every db of its first
// source listing (built, reused or failed).
func (n *Node) Loaded() <-chan struct{} { return n.readyCh }

// Ready reports whether Loaded is closed, the node is not shutting down,
// it can follow the cluster's buckets (WatchError), and it has something
// to serve: its source was listed once, or it serves versions kept on
// disk. (A mistyped source once made a node ready with no dbs at all.)
func (n *Node) Ready() bool {
	select {
	case <-n.readyCh:
	default:
		return false
	}
	if n.ctx == nil || n.ctx.Err() != nil || n.draining.Load() || n.WatchError() != "" {
		return false
	}
	if n.listed.Load() {
		return true
	}
	for _, d := range *n.dbs.Load() {
		if d.active.Load() != nil {
			return true
		}
	}
	return false
}

// WatchError returns why the node cannot follow the cluster's buckets
// (Config.WatchError), or "" when it can.
func (n *Node) WatchError() string {
	if n.cfg.WatchError == nil {
		return ""
	}
	if err := n.cfg.WatchError(); err != nil {
		return err.Error()
	}
	return ""
}

// SourceError returns why the last listing of the source's dbs failed,
// or "" if it succeeded.
func (n *Node) SourceError() string {
	if p := n.sourceErr.Load(); p != nil {
		return *p
	}
	return ""
}

// ID returns the node's ID (Config.NodeID, or the one kept in the data
// dir); "" before Start.
func (n *Node) ID() string { return n.id }

// Drain announces that the node is leaving, before its front doors stop:
// Ready turns false and, with an Advertiser, the node entry's state
// becomes DRAINING. Lookups are still answered. Drain waits until the
// advertiser has tried to write the new state, or ctx ends; it is
// idempotent, and Shutdown calls it.
func (n *Node) Drain(ctx context.Context) error {
	n.drainOnce.Do(func() {
		n.draining.Store(true)
		close(n.drainCh)
	})
	if n.adv == nil {
		return nil
	}
	select {
	case <-n.adv.drainAck:
		return nil
	case <-n.adv.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("node: drain: %w", ctx.Err())
	}
}

// Refresh asks the node to list its source now (SIGHUP). Versions that
// failed to build are tried again. It does not block.
func (n *Node) Refresh() {
	n.forceRefresh.Store(true)
	n.wakeRefresh()
}

// wakeRefresh wakes the refresh loop; a wake-up already queued covers it.
func (n *Node) wakeRefresh() {
	select {
	case n.refreshCh <- struct{}{}:
	default:
	}
}

// Announce tells the node that version of db was published (the change
// feed: the versions bucket). When the node does not know it yet and it is
// newer than the db's active version, or the db is new, the node lists its
// source now, as Refresh does but without retrying failed builds. It does
// not block and is safe for concurrent use.
func (n *Node) Announce(db, version string) {
	if !source.ValidName(db) || !source.ValidName(version) {
		return
	}
	if d, ok := (*n.dbs.Load())[db]; ok {
		if a := d.active.Load(); a != nil && version <= a.name {
			return
		}
		d.mu.Lock()
		_, known := d.versions[version]
		d.mu.Unlock()
		if known {
			return
		}
	}
	n.wakeRefresh()
}

func (n *Node) refreshLoop() {
	var tick <-chan time.Time
	if n.cfg.RefreshPeriod > 0 {
		t := time.NewTicker(n.cfg.RefreshPeriod)
		defer t.Stop()
		tick = t.C
	}
	if n.clustered() {
		n.log.Info("waiting for cluster membership to converge")
		if !n.cfg.Cluster.Converge(n.ctx) {
			return
		}
	}
	// removal fires when a db missing from the source is due for removal:
	// the loop lists the source again, which removes it if still missing.
	var removal loopTimer
	defer removal.stop()
	armRemoval := func() {
		if at := n.removeAt.Load(); at != 0 {
			removal.arm(time.Until(time.Unix(0, at)))
		} else {
			removal.stop()
		}
	}
	n.refresh(true, false)
	armRemoval()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-removal.C():
			n.refresh(false, false)
		case <-tick:
			n.refresh(false, false)
		case <-n.refreshCh:
			n.refresh(false, n.forceRefresh.Swap(false))
		}
		armRemoval()
	}
}

// refresh lists the source's dbs, starts the new ones, marks the ones the
// listing lacks missing and removes those missing for too long
// (missing.go), and tells every listed db to look for a new version.
func (n *Node) refresh(first, force bool) {
	names, err := n.source.ListDBs(n.ctx)
	if err != nil {
		msg := err.Error()
		n.sourceErr.Store(&msg)
		n.log.Error("cannot list dbs; serving what we have", "source", n.source, "err", err)
		n.metrics.refreshErrors.Inc()
		// A removal due waits for a listing that succeeds (missing.go).
		n.removeAt.Store(0)
		if first {
			close(n.readyCh) // ready to serve what was on disk
		}
		return
	}
	n.sourceErr.Store(nil)
	n.listed.Store(true)
	n.dbsMu.Lock()
	old := *n.dbs.Load()
	dbs := make(map[string]*db, len(names))
	listed := make([]*db, 0, len(names))
	for _, name := range names {
		if d, ok := old[name]; ok {
			n.listedAgain(d)
			dbs[name] = d
			listed = append(listed, d)
			continue
		}
		d, err := n.newDB(name)
		if err != nil {
			n.log.Error("cannot set up db", "db", name, "err", err)
			continue
		}
		n.startDB(d)
		dbs[name] = d
		listed = append(listed, d)
	}
	// A db the listing lacks keeps serving until it has been missing for
	// remove_missing_after (missing.go).
	now := time.Now()
	var gone []*db
	for name, d := range old {
		if _, ok := dbs[name]; ok {
			continue
		}
		if n.keepMissing(d, now) {
			dbs[name] = d
			continue
		}
		gone = append(gone, d)
	}
	n.dbs.Store(&dbs)
	var removeAt int64 // none due
	if at := n.nextRemoval(dbs); !at.IsZero() {
		removeAt = at.UnixNano()
	}
	n.removeAt.Store(removeAt)
	for _, d := range gone {
		why := "missing"
		if !d.holdsVersion() {
			why = "empty"
		}
		n.dropDB(d, why)
	}
	n.dbsMu.Unlock()
	n.heldChanged()
	var pending []chan struct{}
	for _, d := range listed {
		done := d.kick(force)
		if first {
			pending = append(pending, done)
		}
	}
	if first {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			for _, done := range pending {
				select {
				case <-done:
				case <-n.ctx.Done():
					return
				}
			}
			close(n.readyCh)
			n.log.Info("initial load done", "dbs", len(pending))
		}()
	}
}

func (n *Node) startDB(d *db) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		d.loop()
	}()
}

// Shutdown stops the node: (1) drains (see Drain), (2) cancels builds,
// the refresh loop, the advertiser and heal loads, (3) waits for them, (4)
// withdraws the node's KV entries (failures are logged: they expire
// anyway), (5) shuts the cluster side down (cluster mode), closes every
// version, waiting for in-flight lookups, (6) releases the data dir and its
// lock. If ctx ends first, Shutdown returns ctx's error and the release
// completes in the background as soon as the cancelled work returns. It is
// idempotent: every call waits for the same release and returns its error.
func (n *Node) Shutdown(ctx context.Context) error {
	n.shutdownOnce.Do(func() {
		n.shutdownDone = make(chan struct{})
		if n.stop == nil {
			close(n.shutdownDone) // never started: nothing to release
			return
		}
		_ = n.Drain(ctx) // bounded by ctx; a failure only delays what peers see
		n.stop()
		go func() { // owned: closes shutdownDone
			defer close(n.shutdownDone)
			n.wg.Wait()
			n.shutdownErr = n.release(ctx)
		}()
	})
	select {
	case <-n.shutdownDone:
		return n.shutdownErr
	case <-ctx.Done():
		return fmt.Errorf("node: shutdown: %w (the release completes in the background)", ctx.Err())
	}
}

// release frees what the node owns once its goroutines have returned.
// The KV entries are withdrawn within ctx, best effort; the rest is
// released whatever ctx says.
func (n *Node) release(ctx context.Context) error {
	if n.adv != nil {
		_ = n.adv.withdrawAll(ctx) // logged; the entries expire anyway
	}
	var errs []error
	if n.clustered() {
		// Its heal loads ended with the node's context, and in-flight
		// lookups with the front doors: this does not wait long.
		errs = append(errs, n.cfg.Cluster.Shutdown(context.Background()))
	}
	for _, d := range *n.dbs.Load() {
		d.closeVersions()
		d.closePlugins()
	}
	n.heldChanged()
	errs = append(errs, n.releaseStaging(), n.store.Close())
	return errors.Join(errs...)
}
