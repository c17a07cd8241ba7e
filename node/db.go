package node

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spangledb/spangle/blocks"
	"github.com/spangledb/spangle/node/advert"
	"github.com/spangledb/spangle/node/source"
	"github.com/spangledb/spangle/plugins"
)

// db is one database's version lifecycle on this node. One goroutine (loop)
// owns discovery, builds and switches; the read path only loads active.
type db struct {
	name        string
	cfg         DBConfig
	node        *Node
	partitioner plugins.Partitioner
	decoder     *plugins.WasmDecoder // nil: values as stored
	contentType string               // the decoder's, else the db config's
	compression blocks.Compression

	// The db's versions (versions.go): lookups load them; only set
	// stores them, on the loop goroutine.
	//
	// active is the version lookups use; nil until one is built.
	active atomic.Pointer[version]
	// pending is a version built and advertised but not yet switched to
	// (pending.go): readable by name only.
	pending atomic.Pointer[version]
	// retired is, in cluster mode, the versions replaced as active but
	// kept for peers naming them (retention.go); nil or a list replaced,
	// never modified.
	retired atomic.Pointer[[]*version]
	// retireTimer fires at the earliest retention deadline (retention.go),
	// retryTimer at the earliest retry of a failed build (failed), and
	// repairTimer at the next try to repair repairRetry (repair.go). The
	// loop owns all three: they start no goroutine, and stop when it
	// returns.
	retireTimer, retryTimer, repairTimer loopTimer
	repairRetry                          *version

	mu sync.Mutex // guards versions, failed and changes
	// versions holds the status of every version this node knows of for
	// the db: active, building, failed.
	versions map[string]*versionState
	// failed holds versions whose build failed; each is tried again once
	// its retry time has passed, or at a forced refresh.
	failed map[string]failedBuild
	// sourceErr is why the last listing of the db's versions failed.
	sourceErr string
	// pinFor is the pin the db last answered (pin.go): pinResolved is the
	// version it resolved to, pinErr why the db cannot follow it. They
	// are published in the node entry, for spangle rollback and activate.
	pinFor      Pin
	pinResolved string
	pinErr      string
	// buildFailed is the last version whose build failed here, and why
	// (peercopy_once.go): the node entry says so, so that peers waiting
	// for this node to build it (build once) build theirs at once.
	buildFailed advert.BuildFailure
	// changes is the changed keys of the newest version checked
	// (changes.go); nil if none are kept. diffs counts the merge diffs
	// the checks made (guards_diff.go).
	changes *changes
	diffs   atomic.Int64
	// pinTarget is the version the pin resolved to at the last update;
	// "" without a pin. The loop's only.
	pinTarget string

	// missingSince is when a listing of the source first lacked the db,
	// in Unix nanoseconds; 0 while it is listed (missing.go).
	missingSince atomic.Int64

	kickCh   chan kick
	nudgeCh  chan struct{} // cluster mode: re-check the pending version
	repairCh chan *version // a damaged version to rebuild (repair.go)
	ctx      context.Context
	cancel   context.CancelFunc
	done     chan struct{} // closed when loop returns

	healMu sync.Mutex // guards healing
	// healing is the heal load under way (heal.go), nil if none. Set and
	// cleared by the heal loop.
	healing *healJob
}

type kick struct {
	force bool
	done  chan struct{} // closed once the kick has been handled
}

// version is an immutable, readable version of a db.
type version struct {
	name        string
	n           int // partitions
	data        *blocks.Version
	partitioner plugins.Partitioner
	modified    time.Time
	state       *versionState
}

// versionState is what the status shows of a version; guarded by db.mu.
type versionState struct {
	name       string
	path       string
	state      string
	createdAt  time.Time
	activeAt   time.Time
	partitions []int
	n          int
	err        string
	progress   *BuildProgress
	heal       *HealStatus // nil until a partition of it is loaded for healing
	// refused is why the activation checks refused the version (checks.go),
	// "" if they did not; forced is set once an operator's pin activated
	// it anyway.
	refused string
	forced  bool
	// refusal is what the node's partitions entry says of the version
	// (Held): refused while not forced; atomic, not guarded (held.go
	// reads it without db.mu).
	refusal atomic.Pointer[string]
	// lastUsed is when a lookup last named the version, in Unix
	// nanoseconds, once it is retired (retention.go); atomic, not guarded.
	lastUsed atomic.Int64
	// damaged is set by the first lookup that met damaged data in this
	// copy of the version (repair.go); atomic, not guarded.
	damaged atomic.Bool
}

func (n *Node) newDB(name string) (*db, error) {
	cfg := n.cfg.dbConfig(name)
	c, err := blocks.ParseCompression(cfg.Compression)
	if err != nil {
		return nil, err
	}
	// Compiling a module takes a while (less with the on-disk cache): it
	// happens here, never on the read path.
	p, err := plugins.Open(n.ctx, cfg.Partitioner, n.cfg.Plugins)
	if err != nil {
		return nil, err
	}
	contentType := cfg.ContentType
	var dec *plugins.WasmDecoder
	if cfg.Decoder != "" {
		dec, err = plugins.OpenDecoder(n.ctx, strings.TrimPrefix(cfg.Decoder, wasmPrefix), n.cfg.Plugins)
		if err != nil {
			closePartitioner(p)
			return nil, err
		}
		if ct := dec.ContentType(); ct != "" {
			contentType = ct
		}
	}
	ctx, cancel := context.WithCancel(n.ctx)
	return &db{
		name:        name,
		cfg:         cfg,
		node:        n,
		partitioner: p,
		decoder:     dec,
		contentType: contentType,
		compression: c,
		versions:    map[string]*versionState{},
		failed:      map[string]failedBuild{},
		kickCh:      make(chan kick, 1),
		repairCh:    make(chan *version, 1),
		nudgeCh:     make(chan struct{}, 1),
		ctx:         ctx,
		cancel:      cancel,
		done:        make(chan struct{}),
	}, nil
}

// kick asks the db to look for a new version. The returned channel is
// closed once it has (for the first kick: once the version is built, reused
// or failed). A kick while one is pending is merged into it: it returns a
// channel already closed, whether or not the pending kick is the first, so
// its caller does not wait for the pending one (and its force, if the
// pending one had none, is dropped).
func (d *db) kick(force bool) chan struct{} {
	k := kick{force: force, done: make(chan struct{})}
	select {
	case d.kickCh <- k:
		return k.done
	default:
		// One is pending; it will run soon enough. Return a closed
		// channel: this caller does not wait for it.
		closed := make(chan struct{})
		close(closed)
		return closed
	}
}

func (d *db) loop() {
	defer close(d.done)
	defer func() {
		d.retireTimer.stop()
		d.retryTimer.stop()
		d.repairTimer.stop()
	}()
	for {
		select {
		case <-d.ctx.Done():
			return
		case k := <-d.kickCh:
			d.update(k.force)
			close(k.done)
		case <-d.nudgeCh:
			d.trySwitch()
		case v := <-d.repairCh:
			d.repair(v)
		case <-d.retireTimer.C():
			d.expireRetired()
		case <-d.retryTimer.C():
			d.update(false)
			d.armRetry()
		case <-d.repairTimer.C():
			v := d.repairRetry
			d.repairRetry = nil
			d.repair(v)
		}
	}
}

// loopTimer is a timer owned by a db's loop goroutine, which selects on
// C: it starts no goroutine, so there is nothing to join at shutdown.
// The zero value is unarmed.
type loopTimer struct{ t *time.Timer }

// C is the timer's channel; nil (never ready) before it is first armed.
func (lt *loopTimer) C() <-chan time.Time {
	if lt.t == nil {
		return nil
	}
	return lt.t.C
}

// arm makes the timer fire once, after d, replacing what it was set to.
func (lt *loopTimer) arm(d time.Duration) {
	if lt.t == nil {
		lt.t = time.NewTimer(d)
		return
	}
	lt.t.Reset(d)
}

// stop disarms the timer; C then stays quiet until the next arm.
func (lt *loopTimer) stop() {
	if lt.t != nil {
		lt.t.Stop()
	}
}

// shutdown stops the db's loops (cancelling a build and a heal), waits
// for them, and closes its versions.
func (d *db) shutdown() {
	d.cancel()
	<-d.done
	d.closeVersions()
	d.closePlugins()
}

// closePlugins releases the db's Wasm modules, if any.
func (d *db) closePlugins() {
	closePartitioner(d.partitioner)
	if d.decoder != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := d.decoder.Close(ctx); err != nil {
			d.node.log.Warn("closing decoder", "db", d.name, "err", err)
		}
	}
}

// closePartitioner closes p if it holds resources (a Wasm module).
func closePartitioner(p plugins.Partitioner) {
	if c, ok := p.(interface{ Close(context.Context) error }); ok {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.Close(ctx) //nolint:errcheck // nothing left to do with the module
	}
}

// update builds and activates the newest version of the source if it is
// newer than the active one. Never goes back to an older version.
func (d *db) update(force bool) {
	log := d.node.log.With("db", d.name)
	versions, err := d.node.source.ListVersions(d.ctx, d.name, d.node.cfg.RequireSuccessFile)
	d.mu.Lock()
	d.sourceErr = ""
	if err != nil {
		d.sourceErr = err.Error()
	}
	d.mu.Unlock()
	if err != nil {
		log.Error("cannot list versions; serving what we have", "err", err)
		d.node.metrics.refreshErrors.Inc()
		return
	}
	d.forgetGoneFailures(versions)
	if len(versions) == 0 {
		return
	}
	if pin := d.node.pinOf(d.name); !pin.IsZero() {
		d.updatePinned(pin, versions)
		if !d.manual() {
			return
		}
		// A manual db builds the newest version ahead, for its activation.
	} else {
		d.pinTarget = ""
		d.setPinResult(Pin{}, "", "")
	}
	cur := d.active.Load()
	latest := versions[len(versions)-1]
	if cur != nil && latest <= cur.name {
		return // never downgrade; nothing new
	}
	if p := d.pending.Load(); p != nil && p.name == latest {
		d.trySwitch() // built already, waiting for replicas
		return
	}
	d.mu.Lock()
	if force {
		clear(d.failed)
	}
	d.mu.Unlock()
	// Newest first: when the newest fails, fall back to the newest one
	// that builds (a fresh node then serves something), never below the
	// active version; the newer ones are tried again on their retry
	// schedule, and win once they build.
	tried := 0
	for i := len(versions) - 1; i >= 0 && tried < maxFallbackBuilds; i-- {
		name := versions[i]
		if cur != nil && name <= cur.name {
			break
		}
		if p := d.pending.Load(); p != nil && name <= p.name {
			break // a version at least this new is built, waiting for replicas
		}
		d.mu.Lock()
		failed := d.failed[name]
		d.mu.Unlock()
		if time.Now().Before(failed.retryAt) {
			continue // failed recently: an older one may build
		}
		if d.reactivate(name, "switching to a version kept here") {
			return // after a rollback is undone
		}
		tried++
		err := d.build(name)
		if err == nil {
			return
		}
		if d.ctx.Err() != nil {
			log.Info("build cancelled", "version", name)
			return
		}
		failed = failed.next(d.node.cfg.RetryFailedAfter)
		serving := "no version serves yet; trying an older one"
		if cur != nil {
			serving = "version " + cur.name + " keeps serving"
		}
		log.Error("version failed to build; "+serving, "version", name, "err", err, "retry_in", failed.delay)
		d.mu.Lock()
		d.failed[name] = failed
		d.mu.Unlock()
		d.armRetry()
	}
}

// forgetGoneFailures drops the failed versions that listed, the source's
// versions of the db (sorted), no longer holds: they serve nothing, and
// their ERROR would otherwise stay in the status, in
// spangle_db_versions{state="ERROR"} and so in the SpangleVersionBuildFailed
// alert until a newer version built. No grace applies, unlike a db
// missing from the source (missing.go): nothing is lost. Called on the
// loop.
func (d *db) forgetGoneFailures(listed []string) {
	gone := func(name string) bool {
		_, ok := slices.BinarySearch(listed, name)
		return !ok
	}
	forgot := 0
	d.mu.Lock()
	for name, s := range d.versions {
		if s.state == StateError && gone(name) {
			delete(d.versions, name)
			forgot++
		}
	}
	for name := range d.failed {
		if gone(name) {
			delete(d.failed, name)
		}
	}
	d.mu.Unlock()
	if forgot > 0 {
		d.node.log.Info("failed versions gone from the source; forgotten", "db", d.name, "versions", forgot)
		d.armRetry()
	}
}

// armRetry sets the retry timer to the earliest retry time still to come
// of the failed builds, or stops it when none waits; when it fires, the
// loop looks for versions again (update), as a kick does. Called on the
// loop.
func (d *db) armRetry() {
	now := time.Now()
	var next time.Time
	d.mu.Lock()
	for _, f := range d.failed {
		if f.delay > 0 && f.retryAt.After(now) && (next.IsZero() || f.retryAt.Before(next)) {
			next = f.retryAt
		}
	}
	d.mu.Unlock()
	if next.IsZero() {
		d.retryTimer.stop()
		return
	}
	d.retryTimer.arm(next.Sub(now))
}

// maxFallbackBuilds bounds the builds one update tries, newest first,
// when the newer versions fail.
const maxFallbackBuilds = 4

// failedBuild is a version whose build failed, and when to try it again.
type failedBuild struct {
	retryAt time.Time     // zero: never failed
	delay   time.Duration // the last pause; 0: never retried
}

// maxRetryFailedFactor caps the retry pause at this multiple of
// Config.RetryFailedAfter.
const maxRetryFailedFactor = 32

// next returns the failure after one more failed build: the pause starts
// at first and doubles each time, up to maxRetryFailedFactor × first. A
// first ≤ 0 means never: retryAt lies in the far future.
func (f failedBuild) next(first time.Duration) failedBuild {
	if first <= 0 {
		return failedBuild{retryAt: time.Now().AddDate(100, 0, 0)}
	}
	delay := first
	if f.delay > 0 {
		delay = min(2*f.delay, maxRetryFailedFactor*first)
	}
	return failedBuild{retryAt: time.Now().Add(delay), delay: delay}
}

func (d *db) newVersionState(name, path string) *versionState {
	s := &versionState{name: name, path: path, state: StateBuilding, createdAt: time.Now()}
	d.mu.Lock()
	d.versions[name] = s
	d.mu.Unlock()
	return s
}

// build builds version name and switches to it.
func (d *db) build(name string) error {
	n := d.node
	log := n.log.With("db", d.name, "version", name)
	state := d.newVersionState(name, n.source.Path(d.name, name))
	fail := func(err error) error {
		d.mu.Lock()
		if d.ctx.Err() != nil {
			delete(d.versions, name)
		} else {
			state.state = StateError
			state.err = err.Error()
		}
		d.mu.Unlock()
		if d.ctx.Err() == nil {
			d.setBuildFailed(name, err) // peercopy_once.go: the node entry says so
		}
		n.metrics.builds.WithLabelValues(d.name, "error").Inc()
		return err
	}

	var retries atomic.Int64
	spec, total, err := d.buildSpec(d.ctx, name, &retries)
	if err != nil {
		return fail(err)
	}
	files := spec.Files
	nparts := len(files)
	plan, err := d.deltaPlanOf(d.ctx, name) // delta.go: nil for a full version
	if err != nil {
		return fail(err)
	}
	if plan != nil {
		nparts = plan.n
	}
	all := make([]int, nparts)
	for i := range all {
		all[i] = i
	}
	if n.clustered() {
		if all, err = n.cfg.Cluster.Assign(VersionInfo{DB: d.name, Version: name, NumPartitions: nparts,
			Partitioner: d.partitioner.Identity()}); err != nil {
			return fail(err)
		}
		spec.Partitions = all
	}
	if err := d.checkSpace(total, len(all), len(files)); err != nil {
		return fail(err)
	}
	if err := d.checkDeltaSpace(plan, all, total); err != nil { // delta.go
		return fail(err)
	}
	started := time.Now()
	d.mu.Lock()
	state.n = nparts
	state.partitions = all
	state.progress = &BuildProgress{FilesTotal: len(files), BytesTotal: total, StartedAt: started}
	d.mu.Unlock()
	log.Info("building version", "files", len(files), "bytes", total, "partitions", len(all))

	lastLog := started
	var streamed atomic.Int64 // of the last build's last progress
	spec.Progress = func(p blocks.BuildProgress) {
		streamed.Store(int64(p.StreamedPartitions))
		bp := progressOf(p, started, &retries)
		d.mu.Lock()
		state.progress = &bp
		d.mu.Unlock()
		n.metrics.buildProgress.WithLabelValues(d.name).Set(bp.Percent / 100)
		n.metrics.buildRecords.WithLabelValues(d.name).Set(float64(p.Records))
		if time.Since(lastLog) >= 2*time.Second {
			lastLog = time.Now()
			log.Info("build progress", "percent", fmt.Sprintf("%.1f", bp.Percent), "records", p.Records,
				"bytes", p.BytesRead, "files_done", p.FilesDone, "files", p.FilesTotal, "download_retries", bp.Retries)
		}
	}

	var bv *blocks.Version
	if plan != nil {
		// A delta: each node applies it to its own partitions (build once
		// would build every partition from the delta's files alone);
		// files a peer built are copied as for any version.
		if bv, err = d.copyFromPeers(d.ctx, name, nparts, all); err == errNoHolder { // peercopy.go
			err = nil
		}
	} else if bv, err = d.fromPeers(d.ctx, spec, name, nparts, all, total); bv != nil { // peercopy_once.go
		// What no peer gave is built from the source (peercopy_rest.go);
		// should that fail, the whole version is, below.
		bv, err = d.buildRest(d.ctx, spec, bv, all)
	}
	if bv == nil && d.ctx.Err() == nil {
		if err != nil {
			log.Warn("peer copy failed, building from the source", "err", err)
		}
		bv, err = d.buildFromSource(d.ctx, spec, plan, all, &retries)
	}
	if bv == nil && err == nil {
		err = d.ctx.Err() // cancelled before the build
	}
	if err != nil {
		return fail(err)
	}
	elapsed := time.Since(started)
	m := bv.Manifest()
	d.mu.Lock()
	state.progress = &BuildProgress{
		FilesDone: len(files), FilesTotal: len(files), BytesRead: total, BytesTotal: total,
		Records: m.Records, Percent: 100, StartedAt: started, DurationSec: elapsed.Seconds(),
		Retries: retries.Load(),
	}
	d.mu.Unlock()
	n.metrics.builds.WithLabelValues(d.name, "ok").Inc()
	n.metrics.streamed.WithLabelValues(d.name).Add(float64(streamed.Load()))
	n.metrics.buildDuration.WithLabelValues(d.name).Set(elapsed.Seconds())
	n.metrics.buildProgress.WithLabelValues(d.name).Set(1)
	log.Info("version built", "records", m.Records, "bytes", m.Bytes, "seconds", elapsed.Seconds(),
		"records_per_second", int64(float64(m.Records)/max(elapsed.Seconds(), 1e-9)))
	if err := d.runChecks(state, bv); err != nil { // checks.go
		return fail(err)
	}
	if n.clustered() || d.manual() || !n.pinOf(d.name).IsZero() || d.refused(state) {
		d.setPending(state, bv)
		d.trySwitch()
	} else {
		d.activate(state, bv)
	}
	// A build leaves its sort buffers to the garbage collector: they go
	// back to the OS beside the loop (memory.go), which moves on.
	n.mem.ask()
	return nil
}

// checkSpace refuses a build that cannot fit on the data dir's disk, so
// that it fails at once, with the reason, rather than after filling the
// disk (which also stalls the embedded NATS server's store). The estimate
// is the source bytes of the partitions this node holds (held of n
// files) times 1.2 (bbolt's pages), plus as much again for the sorted
// runs a build spills beyond its memory budget, plus 64 KiB per
// partition file and 1 MiB of margin.
// Where free space cannot be read, nothing is refused.
func (d *db) checkSpace(total int64, held, n int) error {
	if total <= 0 || n == 0 {
		return nil
	}
	share := total * int64(held) / int64(n)
	need := share + share/5 + int64(held)<<16 + 1<<20
	if share > d.node.cfg.MemoryBudget {
		need += share
	}
	free, err := blocks.FreeBytes(d.node.cfg.DataDir)
	if err != nil || free >= need {
		return nil
	}
	return fmt.Errorf("%w: the build needs about %d MiB, %d MiB are free on the data dir's disk", blocks.ErrNoSpace, need>>20, free>>20)
}

// buildSpec lists version name's files in the source and returns the
// spec that builds all its partitions, and the files' total size
// (unknown sizes count 0). Builds and heals (heal.go) both use it, so
// that a heal reads the source exactly as the build did. Download retries
// are added to retries.
func (d *db) buildSpec(ctx context.Context, name string, retries *atomic.Int64) (blocks.BuildSpec, int64, error) {
	n := d.node
	files, err := n.source.ListFiles(ctx, d.name, name)
	if err != nil {
		return blocks.BuildSpec{}, 0, err
	}
	spec := blocks.BuildSpec{
		DB:            d.name,
		Version:       name,
		Partitioner:   d.partitioner,
		PartitionerID: d.partitioner.Identity(),
		Compression:   d.compression,
		Presharded:    d.cfg.Presharded,
		KeyField:      d.cfg.KeyField,
		ValueField:    d.cfg.ValueField,
	}
	spec.Format, _ = blocks.ParseFormat(d.cfg.Format) // Validate checked it
	var total int64
	for _, f := range files {
		total += max(f.Size, 0)
		spec.Files = append(spec.Files, blocks.SourceFile{
			Name:    f.Name,
			Size:    f.Size,
			ModTime: f.ModTime,
			Open: func(ctx context.Context) (io.ReadCloser, error) {
				rc, err := n.dl.Open(ctx, n.source, d.name, name, f, retries)
				if err != nil {
					return nil, err
				}
				return countingReader{rc, n.metrics.sourceRead.WithLabelValues(d.name)}, nil
			},
			OpenAt: openAt(n.source, d.name, name, f.Name),
		})
	}
	return spec, total, nil
}

// openAt gives a source file's ranged open, if its source has one.
func openAt(src source.Source, db, version, file string) func(context.Context, int64) (io.ReadCloser, error) {
	rs, ok := src.(source.RangeSource)
	if !ok {
		return nil
	}
	return func(ctx context.Context, off int64) (io.ReadCloser, error) {
		return rs.OpenAt(ctx, db, version, file, off)
	}
}

// progressOf is the status of a build or heal from blocks' progress.
func progressOf(p blocks.BuildProgress, started time.Time, retries *atomic.Int64) BuildProgress {
	bp := BuildProgress{
		FilesDone: p.FilesDone, FilesTotal: p.FilesTotal,
		BytesRead: p.BytesRead, BytesTotal: p.BytesTotal,
		Records: p.Records, StartedAt: started, Retries: retries.Load(),
	}
	if p.BytesTotal > 0 {
		bp.Percent = 100 * float64(p.BytesRead) / float64(p.BytesTotal)
	}
	return bp
}

// lastModified dates the version for HTTP caches: its source files' newest
// modification time, the same on every node, or when it became active
// here if the source gives no times.
func (v *version) lastModified() time.Time {
	if m := v.data.Manifest().SourceModified; !m.IsZero() {
		return m
	}
	return v.modified
}

// status returns the db's status; self is this node's name.
func (d *db) status(self string, target int) DBStatus {
	d.mu.Lock()
	defer d.mu.Unlock()
	cur := d.active.Load()
	out := DBStatus{Versions: make(map[string]VersionStatus, len(d.versions)), SourceError: d.sourceErr}
	if pin := d.node.pinOf(d.name); !pin.IsZero() {
		out.Pinned = pin.String()
		if pin == d.pinFor {
			out.PinError = d.pinErr // not an error of a pin since replaced
		}
	}
	if d.manual() {
		out.Activation = ActivationManual
	}
	if since, missing := d.missingFor(); missing {
		out.MissingSince = &since
		if grace := d.node.cfg.RemoveMissingAfter; grace >= 0 {
			at := since.Add(grace)
			out.RemoveAt = &at
		}
	}
	for name, s := range d.versions {
		nv := NodeVersionStatus{
			Name:       self,
			CreatedAt:  s.createdAt,
			Current:    cur != nil && cur.name == name,
			State:      s.state,
			Partitions: append([]int{}, s.partitions...),
			Error:      s.err,
			Refused:    s.refused,
			Forced:     s.forced,
		}
		if !s.activeAt.IsZero() {
			at := s.activeAt
			nv.ActiveAt = &at
		}
		vs := VersionStatus{
			Path:          s.path,
			NumPartitions: s.n,
			Partitioner:   d.partitioner.Identity(),
			Nodes:         map[string]NodeVersionStatus{self: nv},
		}
		if s.progress != nil {
			p := *s.progress
			vs.Build = &p
		}
		if s.heal != nil {
			vs.Heal = s.heal.clone()
		}
		// A single node's replica counts: one for each partition it holds
		// once the version is readable.
		var held []int
		if s.state == StateActive || s.state == StateRemoving {
			held = s.partitions
		}
		vs.CountReplicas(map[string][]int{self: held}, target)
		out.Versions[name] = vs
	}
	return out
}

// CountReplicas fills in the replica counters from the partitions each node
// holds, counting partitions with no replica as missing (sequins did not).
func (vs *VersionStatus) CountReplicas(held map[string][]int, target int) {
	counts := make([]int, vs.NumPartitions)
	for _, ps := range held {
		for _, p := range ps {
			if p >= 0 && p < len(counts) {
				counts[p]++
			}
		}
	}
	vs.TargetReplication = target
	vs.ReplicationHistogram = map[int]int{}
	total := 0
	for _, c := range counts {
		vs.ReplicationHistogram[c]++
		total += c
		switch {
		case c == 0:
			vs.MissingPartitions++
			vs.UnderreplicatedPartitions++
		case c < target:
			vs.UnderreplicatedPartitions++
		case c > target:
			vs.OverreplicatedPartitions++
		}
	}
	if len(counts) > 0 {
		vs.AverageReplication = float64(total) / float64(len(counts))
	}
}
