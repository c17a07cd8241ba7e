package kvwatch

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/internal/backoff"
)

// maxBatch bounds the updates applied between two published snapshots.
const maxBatch = 1024

// bucketWatch is the watch loop's state for one bucket.
type bucketWatch struct {
	watched // the bucket and the kind of its entries
	w       jetstream.KeyWatcher
	cancel  context.CancelFunc             // ends w's subscription (the context given to Watch lives as long)
	updates <-chan jetstream.KeyValueEntry // w.Updates(); nil without a watcher

	lastRev uint64 // highest revision applied to the bucket's map

	// loading is non-nil while a watcher loads the bucket whole: entries
	// are staged there and replace the bucket's map at the end-of-initial-
	// values marker, so that readers never see a half-loaded bucket.
	loading map[string]Entry
	loadRev uint64

	reload    bool // the next watcher must load the bucket whole
	caughtUp  bool // the current watcher delivered its end-of-initial-values marker
	loaded    bool // a whole load has completed once
	started   bool // a watcher was created once
	startedAt time.Time
	nextTry   time.Time
	failures  int
	retry     backoff.Backoff // the pauses between failed starts
}

// watchState is what the watch part shares with the rest of KV, each
// field written on one side only: the reloads repair asks for (set by the
// heartbeat, taken by the loop) and WatchError's answer (set by the
// loop, read by API callers). The staleness the loop decides travels in
// the snapshots it publishes (Snapshot.staleSince).
type watchState struct {
	reload [numBuckets]atomic.Bool
	err    atomic.Pointer[error]
	wake   chan struct{} // the loop's kick (connEvents.watch)
}

// requestReload has the watch loop load bucket b whole soon (after a
// repair: a purge sends watchers nothing, so others' purged keys would
// stay in the snapshot for good).
func (w *watchState) requestReload(b Bucket) {
	w.reload[b].Store(true)
	kick(w.wake)
}

// WatchError returns why a bucket cannot be watched: non-nil from the
// third failed start in a row of one bucket's watcher while connected (the
// stream's consumer limit is reached, the server refuses or does not
// answer), nil again once every watcher runs. A disconnected KV keeps the
// last answer: watchers are not started meanwhile (the snapshot's Stale
// says so). Safe for concurrent use; it never blocks.
func (k *KV) WatchError() error {
	if p := k.watch.err.Load(); p != nil {
		return *p
	}
	return nil
}

// watchLoop is the one goroutine that owns the watchers and builds the
// snapshots. Every update, connection change and watcher restart is
// handled here, in order.
type watchLoop struct {
	k   *KV
	ln  *link           // the connection, as Start bound it
	ctx context.Context // ends when the loop must stop
	bw  []*bucketWatch  // one per watched bucket, in k.buckets' order

	// cases are the select cases of run and drainPending: the fixed ones
	// (caseStop…) then one per bucketWatch's updates, re-read before each
	// select since watchers come and go.
	cases []reflect.SelectCase

	cur  [numBuckets]map[string]Entry // maps of the last published snapshot; never modified
	work [numBuckets]map[string]Entry // copy-on-write copies, non-nil once changed since the last publish

	dirty   bool // something to publish
	changed bool // keys, values or connection state changed: notify subscribers

	connected      bool
	seenReconnects uint64

	pubConnected bool
	pubStale     bool
	since        time.Time
	staleSince   time.Time // since when the snapshot is stale, zero while current
	ready        bool
}

func newWatchLoop(ctx context.Context, k *KV, ln *link) *watchLoop {
	now := time.Now()
	// dirty: the first snapshot is published whatever the connection
	// does, so that the stale age counts from here.
	l := &watchLoop{k: k, ln: ln, ctx: ctx, pubStale: true, since: now, staleSince: now, dirty: true}
	for _, w := range k.buckets {
		hb := k.cfg.heartbeat()
		l.bw = append(l.bw, &bucketWatch{watched: w, retry: backoff.New(min(100*time.Millisecond, hb), hb)})
		l.cur[w.b] = map[string]Entry{}
	}
	return l
}

// The fixed select cases of the watch loop, before the watchers'.
const (
	caseStop = iota
	caseConnKick
	caseTick
	caseDefault // drainPending only; a receive that never fires in run
	numFixedCases
)

// selectUpdates waits for the loop's next event, or with poll for none
// but a watcher update already waiting. It returns the chosen case, and
// for a watcher's case (chosen >= numFixedCases) the bucket watch, the
// update and whether the channel is still open.
func (l *watchLoop) selectUpdates(tick <-chan time.Time, poll bool) (int, *bucketWatch, jetstream.KeyValueEntry, bool) {
	if l.cases == nil {
		l.cases = make([]reflect.SelectCase, numFixedCases+len(l.bw))
		for i := numFixedCases; i < len(l.cases); i++ {
			l.cases[i].Dir = reflect.SelectRecv
		}
	}
	c := l.cases
	if poll {
		c[caseStop], c[caseConnKick], c[caseTick] = reflect.SelectCase{Dir: reflect.SelectRecv}, reflect.SelectCase{Dir: reflect.SelectRecv}, reflect.SelectCase{Dir: reflect.SelectRecv}
		c[caseDefault] = reflect.SelectCase{Dir: reflect.SelectDefault}
	} else {
		c[caseStop] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(l.ctx.Done())}
		c[caseConnKick] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(l.k.events.watch)}
		c[caseTick] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(tick)}
		c[caseDefault] = reflect.SelectCase{Dir: reflect.SelectRecv} // zero Chan: ignored
	}
	for i, bw := range l.bw {
		c[numFixedCases+i].Chan = reflect.Value{} // no watcher: ignored
		if bw.updates != nil {
			c[numFixedCases+i].Chan = reflect.ValueOf(bw.updates)
		}
	}
	chosen, v, ok := reflect.Select(c)
	if chosen < numFixedCases {
		return chosen, nil, nil, ok
	}
	var e jetstream.KeyValueEntry
	if ok && !v.IsNil() {
		e = v.Interface().(jetstream.KeyValueEntry)
	}
	return chosen, l.bw[chosen-numFixedCases], e, ok
}

// run handles events until l.ctx ends, then stops the watchers and
// publishes a last, disconnected snapshot.
func (l *watchLoop) run() {
	tick := time.NewTicker(max(min(l.k.cfg.heartbeat(), l.k.cfg.OpTimeout)/2, 10*time.Millisecond))
	defer tick.Stop()
	l.checkConn()
	l.startWatchers()
	l.publish()
	for {
		switch chosen, bw, e, ok := l.selectUpdates(tick.C, false); chosen {
		case caseStop:
			for _, bw := range l.bw {
				l.stopWatcher(bw)
			}
			l.connected = false
			l.publish()
			return
		case caseConnKick:
			l.checkConn()
			l.checkReloads()
			l.startWatchers()
		case caseTick:
			l.checkConn()
			l.checkStalls()
			l.startWatchers()
		default:
			l.recv(bw, e, ok)
		}
		l.drainPending()
		l.publish()
	}
}

// drainPending applies the updates already waiting, up to maxBatch, so that
// a burst becomes one snapshot.
func (l *watchLoop) drainPending() {
	for range maxBatch {
		chosen, bw, e, ok := l.selectUpdates(nil, true)
		if chosen < numFixedCases {
			return
		}
		l.recv(bw, e, ok)
	}
}

// checkConn notes connection changes. After a reconnect every watcher is
// re-created: the old ones would stay silent for 10-20 s (their ordered
// consumers wait for missed heartbeats before they reset).
func (l *watchLoop) checkConn() {
	connected := l.ln.nc.IsConnected()
	if connected != l.connected {
		l.connected = connected
		l.dirty = true
		if connected {
			l.k.met.connected.Set(1)
		} else {
			l.k.met.connected.Set(0)
			for _, bw := range l.bw {
				bw.caughtUp = false // nothing arrives until the watchers are re-created
			}
		}
	}
	if !connected {
		return
	}
	rc := l.k.events.reconnects.Load()
	if rc == l.seenReconnects {
		return
	}
	l.seenReconnects = rc
	var outage time.Duration
	if at := l.k.events.disconnectedAt.Swap(0); at != 0 {
		outage = time.Since(time.Unix(0, at))
	}
	// Markers of keys deleted or expired during the outage are kept for
	// MarkerTTL. Within half of it a watcher resumes where it stopped;
	// after a longer outage some markers may be gone, and only a whole
	// reload removes those keys.
	reload := outage > l.k.cfg.MarkerTTL/2
	l.k.log.Info("re-creating watchers after reconnect", "outage", outage, "reload", reload)
	for _, bw := range l.bw {
		l.restart(bw, reload)
	}
}

// checkReloads restarts, with a whole load, the watchers of the buckets
// the heartbeat repaired (watchState.requestReload).
func (l *watchLoop) checkReloads() {
	for _, bw := range l.bw {
		if l.k.watch.reload[bw.b].Swap(false) {
			l.restart(bw, true)
		}
	}
}

// checkStalls re-creates the watchers when one of them has not delivered
// an own write acknowledged more than OpTimeout ago: its consumer is stuck,
// as happens for 10-20 s when the server hosting it goes away in a
// cluster, and a new one resumes at once. All are re-created, since the
// same event likely hit the others, and a bucket this node never writes
// (Versions) has no write to notice it by.
func (l *watchLoop) checkStalls() {
	if !l.connected {
		return
	}
	d := l.k.cfg.OpTimeout
	for _, bw := range l.bw {
		if bw.w == nil || bw.loading != nil || time.Since(bw.startedAt) < d {
			continue
		}
		if l.k.writes.stalled(bw.b, bw.lastRev, d) {
			l.k.log.Warn("watcher missed an own write; re-creating the watchers", "bucket", bw.b, "revision", bw.lastRev)
			for _, bw := range l.bw {
				l.restart(bw, false)
			}
			return
		}
	}
}

// restart stops bw's watcher, if any, so that startWatchers creates a new
// one at once.
func (l *watchLoop) restart(bw *bucketWatch, reload bool) {
	l.stopWatcher(bw)
	bw.reload = bw.reload || reload
	bw.caughtUp = false
	bw.nextTry = time.Time{}
	bw.failures = 0
	bw.retry.Reset()
	l.dirty = true
}

// stopWatcher stops bw's watcher and drains it in the background: the
// client's delivery goroutine may be blocked on the watcher's full channel,
// and only a drain lets it see the unsubscribe, close the channel and exit.
func (l *watchLoop) stopWatcher(bw *bucketWatch) {
	w, cancel := bw.w, bw.cancel
	bw.w, bw.cancel, bw.updates, bw.loading = nil, nil, nil, nil
	if w != nil {
		l.k.drainWatcher(w, cancel)
	}
}

// drainWatcher stops w and reads its channel until the client closes it.
func (k *KV) drainWatcher(w jetstream.KeyWatcher, cancel context.CancelFunc) {
	k.drains.Go(func() {
		_ = w.Stop()
		cancel()
		for range w.Updates() {
		}
	})
}

// startWatchers creates the missing watchers, each no sooner than its
// retry time.
func (l *watchLoop) startWatchers() {
	if !l.connected {
		return
	}
	now := time.Now()
	for _, bw := range l.bw {
		if bw.w != nil || now.Before(bw.nextTry) {
			continue
		}
		if err := l.start(bw); err != nil {
			bw.failures++
			bw.nextTry = now.Add(bw.retry.Next())
			lvl := l.k.log.Debug
			if bw.failures%10 == 3 {
				lvl = l.k.log.Warn
			}
			lvl("cannot start watcher", "bucket", bw.b, "failures", bw.failures, "err", err)
			if bw.failures >= watchFailures {
				err = fmt.Errorf("kvwatch: cannot watch bucket %s (%d attempts): %w", bw.name, bw.failures, err)
				l.k.watch.err.Store(&err)
			}
		}
	}
	for _, bw := range l.bw {
		if bw.w == nil && bw.failures >= watchFailures {
			return
		}
	}
	l.k.watch.err.Store(nil)
}

// watchFailures is how many failed starts in a row of one watcher, while
// connected, make WatchError report it: the third (0.2 to 0.35 s after the
// first when the server refuses at once; a few OpTimeouts when it does not
// answer), the same at which the failure is first logged as a warning.
const watchFailures = 3

// start creates bw's watcher: resuming after the last revision applied, or
// loading the bucket whole when nothing was loaded yet, when a reload is
// due, or when the bucket's stream is behind that revision (it was
// re-created).
func (l *watchLoop) start(bw *bucketWatch) error {
	kv := l.ln.kvs[bw.b]
	full := bw.lastRev == 0 || bw.reload
	if !full {
		ctx, cancel := context.WithTimeout(l.ctx, l.k.cfg.OpTimeout)
		st, err := kv.Status(ctx)
		cancel()
		if err != nil {
			return l.bucketGone(bw.watched, err)
		}
		if bs, ok := st.(*jetstream.KeyValueBucketStatus); ok && bs.StreamInfo().State.LastSeq < bw.lastRev {
			l.k.log.Warn("bucket is behind the last revision seen (re-created?); reloading it",
				"bucket", bw.b, "last_seen", bw.lastRev, "last_in_bucket", bs.StreamInfo().State.LastSeq)
			full = true
		}
	}
	var opts []jetstream.WatchOpt
	if !full {
		opts = append(opts, jetstream.ResumeFromRevision(bw.lastRev+1))
	}
	// The watcher's subscription lives as long as the context given to
	// WatchAll, which also bounds the creation: a timer cancels it if the
	// creation takes longer than OpTimeout.
	wctx, wcancel := context.WithCancel(l.ctx)
	timer := time.AfterFunc(l.k.cfg.OpTimeout, wcancel)
	w, err := kv.WatchAll(wctx, opts...)
	if !timer.Stop() {
		if err == nil {
			l.k.drainWatcher(w, wcancel)
		}
		wcancel()
		return fmt.Errorf("watch: %w (%v)", context.DeadlineExceeded, err)
	}
	if err != nil {
		wcancel()
		return l.bucketGone(bw.watched, err)
	}
	mode := "resume"
	if full {
		mode = "reload"
		bw.loading, bw.loadRev = map[string]Entry{}, 0
	}
	if bw.started {
		l.k.met.watcherRestarts.WithLabelValues(bw.b.String(), mode).Inc()
	}
	bw.w, bw.cancel, bw.updates = w, wcancel, w.Updates()
	bw.started, bw.startedAt = true, time.Now()
	bw.caughtUp, bw.failures = false, 0
	bw.retry.Reset()
	l.k.log.Debug("watcher started", "bucket", bw.b, "mode", mode, "after_revision", bw.lastRev)
	return nil
}

// bucketGone returns err, and logs once that bucket w is missing when err
// says so: the heartbeat creates it again (bucketReset), not the watch
// loop, which would create it the moment the server forgets it, while
// the server still moves its files away (see bucketSeen).
func (l *watchLoop) bucketGone(w watched, err error) error {
	if bucketMissing(err) {
		l.k.log.Debug("bucket missing; waiting for the heartbeat to create it again", "bucket", w.b)
	}
	return err
}

// recv handles one value from bw's watcher channel.
func (l *watchLoop) recv(bw *bucketWatch, e jetstream.KeyValueEntry, ok bool) {
	b := bw.b
	switch {
	case !ok: // the subscription ended under us
		l.k.log.Warn("watcher closed; re-creating it", "bucket", b)
		bw.cancel()
		bw.w, bw.cancel, bw.updates, bw.loading = nil, nil, nil, nil
		bw.caughtUp = false
		l.dirty = true
	case e == nil: // end of initial values
		if bw.loading != nil {
			if !sameContent(l.view(b), bw.loading) {
				l.changed = true
			}
			l.work[b] = bw.loading
			bw.lastRev = bw.loadRev
			bw.loading = nil
			bw.reload = false
			bw.loaded = true
		}
		bw.caughtUp = true
		l.dirty = true
	case bw.loading != nil:
		apply(bw.loading, e)
		bw.loadRev = max(bw.loadRev, e.Revision())
	case e.Revision() > bw.lastRev:
		bw.lastRev = e.Revision()
		if b == Versions {
			l.k.puts.saw(e.Key(), e.Revision())
		}
		if b.TTL() && isRefresh(l.view(b), e) {
			// The same value written again to keep it alive: the snapshot
			// stays as it is (no copy, no rebuild, no notification), so a
			// heartbeat costs readers almost nothing.
			l.k.met.refreshesSkipped.Inc()
			return
		}
		if apply(l.mutable(b), e) {
			l.changed = true
		}
		l.dirty = true
	}
}

// isRefresh reports whether e writes again the value m holds for its key.
func isRefresh(m map[string]Entry, e jetstream.KeyValueEntry) bool {
	if e.Operation() != jetstream.KeyValuePut {
		return false
	}
	old, had := m[e.Key()]
	return had && bytes.Equal(old.Value, e.Value())
}

// apply applies one update to m and reports whether keys or values
// changed. Deletes, purges and TTL expiry markers (Nats-Marker-Reason,
// which the client reports as a purge) remove the key.
func apply(m map[string]Entry, e jetstream.KeyValueEntry) bool {
	key := e.Key()
	if e.Operation() != jetstream.KeyValuePut {
		_, had := m[key]
		delete(m, key)
		return had
	}
	old, had := m[key]
	m[key] = Entry{Value: e.Value(), Revision: e.Revision(), Created: e.Created()}
	return !had || !bytes.Equal(old.Value, e.Value())
}

// view returns bucket b's map as it stands, published or not.
func (l *watchLoop) view(b Bucket) map[string]Entry {
	if l.work[b] != nil {
		return l.work[b]
	}
	return l.cur[b]
}

// mutable returns a map of bucket b that may be changed: a copy of the
// published one.
func (l *watchLoop) mutable(b Bucket) map[string]Entry {
	if l.work[b] == nil {
		l.work[b] = maps.Clone(l.cur[b])
	}
	return l.work[b]
}

// publish swaps in a new snapshot if anything changed and notifies the
// subscribers if keys, values or the connection state changed.
func (l *watchLoop) publish() {
	stale := !l.connected
	for _, bw := range l.bw {
		stale = stale || !bw.caughtUp
	}
	if stale != l.pubStale || l.connected != l.pubConnected {
		now := time.Now()
		if stale && !l.pubStale {
			l.staleSince = now
		} else if !stale {
			l.staleSince = time.Time{}
		}
		l.pubStale, l.pubConnected, l.since = stale, l.connected, now
		l.dirty, l.changed = true, true
	}
	if !l.dirty {
		return
	}
	s := &Snapshot{connected: l.connected, current: !stale, since: l.since, staleSince: l.staleSince}
	for _, bw := range l.bw {
		if l.work[bw.b] != nil {
			l.cur[bw.b], l.work[bw.b] = l.work[bw.b], nil
		}
		s.buckets[bw.b] = l.cur[bw.b]
		s.revisions[bw.b] = bw.lastRev
		l.k.met.revision.WithLabelValues(bw.b.String()).Set(float64(bw.lastRev))
	}
	l.k.snaps.store(s, l.changed)
	if !l.ready && l.allLoaded() {
		l.ready = true
		close(l.k.ready)
	}
	l.dirty, l.changed = false, false
}

// allLoaded reports whether every watched bucket has been loaded whole
// once.
func (l *watchLoop) allLoaded() bool {
	for _, bw := range l.bw {
		if !bw.loaded {
			return false
		}
	}
	return true
}
