package kvwatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/internal/backoff"
	"github.com/spangledb/spangle/kvwatch/natsconn"
	"github.com/spangledb/spangle/kvwatch/region"
)

// KV connects a node to the cluster's JetStream KV buckets: it keeps the
// node's own TTL'd entries alive and mirrors every bucket into an immutable
// Snapshot. Its methods are safe for concurrent use. Create it with New.
//
// KV is a facade over parts that each own their state; the goroutines
// own theirs outright and are talked to through channels:
//
//   - link (conn.go's connection, bound by Start, immutable): handed to
//     each loop at start; connEvents (conn.go): what the NATS callbacks
//     learn, and the kicks of the loops;
//   - the own loop (own_loop.go): one goroutine owning this node's own
//     TTL'd entries, which starts every write of them (Publish, Withdraw,
//     the heartbeat's refreshes, repair's rewrites, Shutdown's deletes)
//     and answers through futures; the heartbeat (own.go) is its clock;
//   - putLog (puts.go): the Versions entries of Put, for repair
//     (repair.go); writeLog (stall.go): own writes not yet delivered,
//     for the stall check;
//   - the watch loop (watch.go): one goroutine owning the watchers and the
//     maps they fill, which publishes into snapshots (subscribe.go): the
//     current snapshot, its staleness included, and the subscribers;
//     watchState: the reloads repair asks of it and WatchError's answer;
//   - the hub check (hub.go), the embedded server's supervisor
//     (recover.go) and the heartbeat: the background routines;
//   - mu: the lifecycle below, and nothing else.
//
// Locks: mu, putLog's, writeLog's and snapshots' are leaves: nothing
// takes another lock, or waits on a loop, while holding one. The own loop
// and the watch loop hold no lock while they wait.
type KV struct {
	cfg Config
	log *slog.Logger
	met *metrics
	emb embedded
	// self are this process's logins on the embedded server when it has
	// users: NKeys made at New, never stored (selfKeys).
	self selfKeys
	// buckets are the buckets bound and watched (watchedBuckets), set by
	// New.
	buckets []watched

	snaps *snapshots    // the current snapshot and the subscribers
	ready chan struct{} // closed by the watch loop after the first full load of every bucket

	events *connEvents // written by the NATS callbacks, read by the watch loop and the heartbeat

	watch *watchState // the watch loop's answers and the reloads asked of it

	// mu guards the lifecycle fields below. It is held across I/O only
	// while a failed Start cleans up.
	mu          sync.Mutex
	state       lifeState
	startCancel context.CancelFunc // cancels a Start in progress
	startDone   chan struct{}      // closed when Start returns
	ln          *link              // set once running
	background  *routines          // heartbeat, embedded server's supervisor, hub check; set once running
	loop        *routines          // the own loop and the watch loop; set once running
	shutdownErr error

	own *ownLoop // this node's own TTL'd entries, owned by one goroutine

	writes writeLog // own writes not yet delivered, for the stall check

	puts putLog // Versions entries written by Put, for repair

	drains sync.WaitGroup // watcher drains, waited for after the connection closed
}

type lifeState int

const (
	stateNew lifeState = iota
	stateStarting
	stateRunning
	stateClosed
)

// New validates cfg and returns a KV that is not started: it neither
// connects nor starts a server. Snapshot returns an empty, stale snapshot
// until the watchers have loaded the buckets.
func New(cfg Config) (*KV, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.URLs = slices.Clone(cfg.URLs)
	cfg.EmbeddedRoutes = slices.Clone(cfg.EmbeddedRoutes)
	cfg.EmbeddedUsers = slices.Clone(cfg.EmbeddedUsers)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	k := &KV{
		cfg:     cfg,
		log:     cfg.Logger.With("component", "kvwatch", "cluster", cfg.ClusterName),
		ready:   make(chan struct{}),
		puts:    putLog{m: make(map[string]*ownPut)},
		buckets: watchedBuckets(cfg.ClusterName),
	}
	k.own = newOwnLoop(k)
	k.met = newMetrics(k.staleSeconds)
	k.events = newConnEvents(k.log, k.met.reconnects)
	k.watch = &watchState{wake: k.events.watch}
	if cfg.Embedded() && len(cfg.EmbeddedUsers) > 0 {
		var err error
		if k.self, err = newSelfKeys(cfg); err != nil {
			return nil, err
		}
	}
	empty := &Snapshot{since: time.Now()}
	for _, b := range allBuckets {
		empty.buckets[b] = map[string]Entry{}
	}
	k.snaps = newSnapshots(empty, k.met.droppedNotifies)
	return k, nil
}

// Start starts the embedded server (when Config.URLs is empty), connects,
// creates or updates the buckets and starts the heartbeat and the
// watchers. It blocks until the buckets are bound, retrying failures until
// ctx ends, and then returns the last failure; it does not wait for the
// first snapshot (see Ready). A node that wants to serve local data while
// NATS is unreachable calls Start from a goroutine of its own. Shutdown
// cancels a Start in progress. After a failed Start, Start may be called
// again; after a successful one it returns ErrStarted.
func (k *KV) Start(ctx context.Context) error {
	k.mu.Lock()
	switch k.state {
	case stateClosed:
		k.mu.Unlock()
		return ErrClosed
	case stateStarting, stateRunning:
		k.mu.Unlock()
		return ErrStarted
	}
	k.state = stateStarting
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	k.startCancel = cancel
	done := make(chan struct{})
	defer close(done)
	k.startDone = done
	k.mu.Unlock()

	nc, js, kvs, err := k.connect(ctx)

	k.mu.Lock()
	defer k.mu.Unlock()
	if err == nil && k.state != stateStarting {
		err = ErrClosed // Shutdown came in meanwhile
	}
	if err != nil {
		k.abortStart(nc)
		if k.state == stateStarting {
			k.state = stateNew
		}
		return err
	}
	k.state = stateRunning
	ln := &link{nc: nc, js: js, kvs: kvs}
	k.ln = ln
	k.background, k.loop = newRoutines(), newRoutines()
	k.background.goFunc(func(ctx context.Context) { k.heartbeat(ctx, ln) })
	if k.cfg.Embedded() {
		k.background.goFunc(k.superviseEmbedded)
	}
	if k.cfg.Region.Enabled() {
		k.background.goFunc(func(ctx context.Context) { k.watchHub(ctx, ln.nc) })
	}
	k.loop.goFunc(func(ctx context.Context) { k.own.run(ctx, ln) })
	k.loop.goFunc(func(ctx context.Context) { newWatchLoop(ctx, k, ln).run() })
	return nil
}

// connect does the work of Start: metrics, embedded server, connection,
// buckets. On failure it returns the connection, if any, for abortStart.
func (k *KV) connect(ctx context.Context) (*nats.Conn, jetstream.JetStream, [numBuckets]jetstream.KeyValue, error) {
	var kvs [numBuckets]jetstream.KeyValue
	if err := k.met.register(k.cfg.Registerer); err != nil {
		return nil, nil, kvs, err
	}
	var url string
	if k.cfg.Embedded() {
		opts, err := serverOptions(k.cfg, k.self)
		if err != nil {
			return nil, nil, kvs, fmt.Errorf("kvwatch: embedded server options: %w", err)
		}
		s, err := k.emb.startServer(ctx, opts, k.cfg.Logger)
		if errors.Is(err, ErrEmbeddedServer) {
			return nil, nil, kvs, err // it says kvwatch: and what, once
		}
		if err != nil {
			return nil, nil, kvs, fmt.Errorf("kvwatch: start embedded server: %w", err)
		}
		k.emb.srv.Store(s)
		waitMetaCurrent(ctx, s)
		url = s.ClientURL()
		k.log.Info("embedded NATS server started", "url", url, "store_dir", k.cfg.EmbeddedStoreDir,
			"server_name", s.Name(), "nats_cluster", k.cfg.EmbeddedClusterName)
	} else {
		url = strings.Join(k.cfg.URLs, ",")
	}
	opts, err := k.connOptions()
	if err != nil {
		return nil, nil, kvs, err
	}
	nopts := k.cfg.natsOptions()
	nc, err := natsconn.Connect(url, nopts, opts...)
	if err != nil {
		return nil, nil, kvs, fmt.Errorf("kvwatch: connect %s: %w", url, err)
	}
	js, err := natsconn.JetStream(nc, nopts)
	if err != nil {
		return nc, nil, kvs, fmt.Errorf("kvwatch: jetstream: %w", err)
	}
	if k.cfg.Region.Enabled() {
		if err := k.checkDomain(ctx, nc); err != nil {
			return nc, nil, kvs, err
		}
	}
	for _, w := range k.buckets {
		kv, err := k.bindBucket(ctx, js, w)
		if err != nil {
			return nc, nil, kvs, err
		}
		kvs[w.b] = kv
	}
	return nc, js, kvs, nil
}

// abortStart undoes a failed Start: closes nc, stops the embedded server
// and unregisters the metrics. k.mu is held.
func (k *KV) abortStart(nc *nats.Conn) {
	if nc != nil {
		nc.Close()
	}
	if s := k.emb.srv.Swap(nil); s != nil {
		s.Shutdown()
		s.WaitForShutdown()
	}
	k.met.unregister()
}

// bindBucket creates or updates bucket w, retrying until ctx ends. The
// first attempts are given less than OpTimeout: when several nodes create
// the same bucket of a clustered JetStream at once, the requests that lose
// the race go unanswered, and creating is idempotent, so trying again soon
// is both safe and faster.
func (k *KV) bindBucket(ctx context.Context, js jetstream.JetStream, w watched) (jetstream.KeyValue, error) {
	pause := backoff.New(50*time.Millisecond, time.Second)
	attempt := min(250*time.Millisecond, k.cfg.OpTimeout)
	for {
		kv, err := k.ensureBucket(ctx, js, w, attempt)
		if err == nil {
			return kv, nil
		}
		k.log.Debug("bucket not ready", "bucket", w.b, "err", err)
		if !pause.Wait(ctx) {
			return nil, fmt.Errorf("kvwatch: bucket %s: %w (last error: %w)", w.name, ctx.Err(), notConnectedError(js.Conn(), err))
		}
		attempt = min(2*attempt, k.cfg.OpTimeout) // an attempt's timeout, not a pause
	}
}

// ensureBucket creates bucket w or updates its configuration, within
// timeout. A bucket that exists with this configuration is only bound: an
// update is a proposal to the JetStream meta group even when nothing
// changes, and a hundred nodes starting at once made a storm of them
// (JetStream requests timed out for minutes).
func (k *KV) ensureBucket(ctx context.Context, js jetstream.JetStream, w watched, timeout time.Duration) (jetstream.KeyValue, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if w.b == Versions && k.cfg.Region.Enabled() {
		// In a region, Versions is the mirror of the hub's.
		want := k.cfg.Region.VersionsMirror(w.name,
			"spangle region "+k.cfg.Region.Name+" mirror of versions of cluster "+k.cfg.ClusterName, k.cfg.Replicas)
		return region.EnsureVersionsMirror(ctx, js, want, k.cfg.Region.HubDomain)
	}
	want := k.cfg.bucketConfig(w)
	if kv, err := js.KeyValue(ctx, want.Bucket); err == nil {
		if st, err := kv.Status(ctx); err == nil && sameBucketConfig(st.Config(), want) {
			if !k.cfg.consumersLimited(st) {
				return kv, k.cfg.limitConsumers(ctx, js, want.Bucket)
			}
			return kv, nil
		}
	}
	if err := k.storeRoom(); err != nil {
		return nil, err
	}
	// Creating or updating the bucket leaves its stream's consumers
	// unbounded: a second update bounds them.
	kv, err := js.CreateOrUpdateKeyValue(ctx, want)
	if err != nil {
		return nil, err
	}
	return kv, k.cfg.limitConsumers(ctx, js, want.Bucket)
}

// bucketConfig is the configuration the nodes give bucket w.
func (c Config) bucketConfig(w watched) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:         w.name,
		Description:    "spangle " + w.b.String() + " of cluster " + c.ClusterName,
		History:        1,
		Replicas:       c.Replicas,
		Storage:        jetstream.FileStorage,
		LimitMarkerTTL: c.MarkerTTL,
	}
}

// sameBucketConfig reports whether an existing bucket's configuration is
// the one this KV would set.
func sameBucketConfig(have, want jetstream.KeyValueConfig) bool {
	return have.Description == want.Description && have.History == want.History &&
		have.Replicas == want.Replicas && have.Storage == want.Storage &&
		have.LimitMarkerTTL == want.LimitMarkerTTL
}

// Region returns the region configuration the KV runs with (its Name is
// empty outside regions).
func (k *KV) Region() region.Config { return k.cfg.Region }

// Ready returns a channel closed once the first full load of every bucket
// is in the snapshot (each watcher delivered its end-of-initial-values
// marker). It never closes if Start fails or Shutdown comes first.
func (k *KV) Ready() <-chan struct{} { return k.ready }

// Snapshot returns the current snapshot. It never blocks, never returns nil
// and never touches the network: it is safe on any path.
func (k *KV) Snapshot() *Snapshot { return k.snaps.load() }

// Conn returns the NATS connection for other packages (the NATS front
// door), or nil before Start. The KV owns it: callers must not close or
// drain it; Shutdown closes it.
func (k *KV) Conn() *nats.Conn {
	if ln := k.link(); ln != nil {
		return ln.nc
	}
	return nil
}

// JetStream returns the KV's JetStream handle, on Conn, for other
// packages (the Object Store source), or nil before Start. It is safe for
// concurrent use; the KV owns its connection.
func (k *KV) JetStream() jetstream.JetStream {
	if ln := k.link(); ln != nil {
		return ln.js
	}
	return nil
}

// link returns the connection part, nil before Start bound it; it stays
// after Shutdown (closed).
func (k *KV) link() *link {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ln
}

// ClientURL returns the URL at which the embedded server accepts clients
// (nats://host:port), or "" when the KV uses external servers or the
// embedded server is not running.
func (k *KV) ClientURL() string {
	if s := k.emb.srv.Load(); s != nil {
		return s.ClientURL()
	}
	return ""
}

// handles returns the JetStream handles once Start has succeeded.
func (k *KV) handles() (jetstream.JetStream, *[numBuckets]jetstream.KeyValue, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch k.state {
	case stateRunning:
		return k.ln.js, &k.ln.kvs, nil
	case stateClosed:
		return nil, nil, ErrClosed
	}
	return nil, nil, ErrNotStarted
}

// Shutdown stops the KV. It is idempotent (later calls return the first
// call's result) and bounded by ctx: whatever is left when ctx ends is cut
// short, and ctx's error is returned. In order:
//
//  1. cancel a Start in progress and wait for it to return;
//  2. stop the heartbeat;
//  3. delete own entries (Publish), so peers see this node leave at once
//     rather than after EntryTTL (failures are logged, not returned: the
//     entries expire anyway); a Publish after this fails with ErrClosed;
//  4. stop the own loop and the watchers; the last snapshot stays readable;
//  5. flush and close the connection;
//  6. shut the embedded server down and wait for it;
//  7. close the subscribers' channels and unregister the metrics.
func (k *KV) Shutdown(ctx context.Context) error {
	k.mu.Lock()
	switch k.state {
	case stateClosed:
		err := k.shutdownErr
		k.mu.Unlock()
		return err
	case stateNew:
		k.state = stateClosed
		k.mu.Unlock()
		k.snaps.close()
		return nil
	case stateStarting:
		k.state = stateClosed
		cancel, done := k.startCancel, k.startDone
		k.mu.Unlock()
		// 1. Start sees stateClosed and cleans up after itself.
		cancel()
		<-done
		k.snaps.close()
		return nil
	}
	k.state = stateClosed
	nc, background, loop := k.ln.nc, k.background, k.loop
	k.mu.Unlock()

	var errs []error
	// 2. Stop the heartbeat and the embedded server's supervisor.
	background.stop()

	// 3. Delete own entries.
	k.own.close(ctx)

	// 4. Stop the own loop and the watchers.
	loop.stop()

	// 5. Flush and close the connection. Closing ends the watcher drains.
	if nc.IsConnected() {
		fctx, cancel := context.WithTimeout(ctx, k.cfg.OpTimeout)
		_ = nc.FlushWithContext(fctx)
		cancel()
	}
	nc.Close()
	k.drains.Wait()

	// 6. Shut the embedded server down.
	if s := k.emb.srv.Swap(nil); s != nil {
		if err := shutdownServer(ctx, s); err != nil {
			errs = append(errs, err)
		}
	}

	// 7. Subscribers and metrics.
	k.snaps.close()
	k.met.unregister()

	err := errors.Join(errs...)
	if err == nil {
		err = ctx.Err()
	}
	k.mu.Lock()
	k.shutdownErr = err
	k.mu.Unlock()
	k.log.Info("kvwatch stopped", "err", err)
	return err
}

// shutdownServer shuts s down and waits for it, or for ctx.
func shutdownServer(ctx context.Context, s *server.Server) error {
	done := make(chan struct{})
	go func() { // bounded: Shutdown returns once the server's goroutines have
		defer close(done)
		s.Shutdown()
		s.WaitForShutdown()
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("kvwatch: embedded server shutdown: %w", ctx.Err())
	}
}

// staleSeconds is the stale-age metric: how long the current snapshot
// has been stale.
func (k *KV) staleSeconds() float64 {
	since := k.snaps.load().staleSince
	if since.IsZero() {
		return 0
	}
	return time.Since(since).Seconds()
}

// kick sends a non-blocking wake-up on ch.
func kick(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
