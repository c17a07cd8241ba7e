package spangle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/internal/listenaddr"
	"github.com/spangledb/spangle/kvwatch"
	"github.com/spangledb/spangle/kvwatch/names"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/cluster"
	"github.com/spangledb/spangle/node/kvcluster"
	"github.com/spangledb/spangle/node/source/objstore"
	"github.com/spangledb/spangle/node/source/s3"
)

// Server is a complete spangle node: kvwatch (an embedded NATS server by
// default), the node, the cluster side when Config.Clustered, the feeds
// of the versions bucket, the purge hooks, and the doors (HTTP, NATS, the
// debug listener).
type Server struct {
	log   *slog.Logger
	node  *node.Node
	ln    net.Listener
	http  *edge.Server
	debug *http.Server // nil without Config.DebugBind
	tls   *edge.TLS    // nil without HTTPS
	nats  *natsDoor
	// The access logs ([http] and [nats] access_log); nil when off.
	httpLog, natsLog *edge.AccessLog
	// fatal receives the first error that makes serving pointless (a
	// listener failed, the embedded NATS server cannot start); buffered 1,
	// never blocks a sender.
	fatal   chan error
	closer  []func()       // feeds, views, purger: stopped last in, first out
	serving bool           // the HTTP listener is served (and closed by Shutdown)
	wg      sync.WaitGroup // the listeners' goroutines, waited for by Shutdown

	shutdownOnce sync.Once
	shutdownErr  error
}

// Start starts a node on cfg and returns once its HTTP listener is bound:
// versions already on disk serve at once, and NATS connects in the
// background. Shutdown stops it. The order:
//
//  1. the Go runtime's tuning, the metrics registry, and the TLS
//     certificate when HTTPS is on (checked for renewals from here on);
//  2. the checks of what would fail later (the TLS files, the NATS
//     cluster name, preflight: the data dir's lock, the ports, the
//     source) and the HTTP listener, every problem reported at once;
//     kvwatch (NATS, not yet connected);
//  3. the cluster side (when Clustered), the source and the node;
//  4. the feeds of the versions bucket and the purge hooks;
//  5. the HTTP front door, the node's start, the NATS front door (in
//     the background), then the listeners serve.
func Start(cfg Config) (_ *Server, err error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{log: log, fatal: make(chan error, 1)}
	defer func() {
		if err != nil {
			s.release()
		}
	}()
	tuneRuntime(cfg)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg.Node.Logger, cfg.Node.Registerer = log, reg
	var errs []error
	if err := s.startTLS(&cfg, reg); err != nil {
		errs = append(errs, err) // reported with preflight's
	}
	if err := s.startAccessLogs(cfg, reg); err != nil {
		errs = append(errs, err)
	}

	kcfg := natsConfig(cfg, log, reg)
	if !names.Valid(kcfg.ClusterName) {
		errs = append(errs, fmt.Errorf("nats.cluster_name %q must match %s", kcfg.ClusterName, names.Pattern))
	}
	errs = append(errs, preflight(cfg, log)...)
	if s.ln, err = net.Listen("tcp", cfg.Bind); err != nil {
		errs = append(errs, bindError(cfg.Bind, "bind (--bind)", err))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	kv, err := kvwatch.New(kcfg)
	if err != nil {
		return nil, err
	}
	cfg.Node.Advertiser = kvcluster.NewAdvertiser(kv)
	cfg.Node.AdvertiseSubjects = edge.SubjectPrefix(kcfg.ClusterName)
	cfg.Node.AdvertiseAddress = advertisedAddress(s.ln.Addr(), cfg.AdvertisedHostname)
	cfg.Node.BinaryVersion = cfg.Version
	cfg.Node.WatchError = kv.WatchError
	if cfg.Clustered {
		if cfg.Node.Cluster, err = s.startCluster(cfg, kv, reg); err != nil {
			return nil, err
		}
	}
	objects, err := openSource(&cfg, kv)
	if err != nil {
		return nil, err
	}
	cfg.Node.ChangedKeys = cfg.Purge.MaxKeys() // the purge hooks' key by key purges
	if s.node, err = node.New(cfg.Node); err != nil {
		return nil, err
	}
	s.startFeeds(cfg, kv, objects)
	if err := s.startPurger(cfg.Purge, reg); err != nil {
		return nil, err
	}
	if s.http, err = s.newHTTP(cfg, reg); err != nil {
		return nil, err
	}
	if err := s.node.Start(); err != nil {
		return nil, err
	}
	s.nats = startNATS(log, kv, s.natsDoorConfig(cfg, kcfg.ClusterName, reg), s.fatal)
	log.Info("spangle serving", "version", cfg.Version, "bind", s.ln.Addr().String(), "https", s.tls != nil, "source", cfg.Node.Source,
		"data_dir", cfg.Node.DataDir)
	s.serve(cfg)
	return s, nil
}

// tuneRuntime sets the GC percent and the soft memory limit ([runtime]).
// The environment (GOGC, GOMEMLIMIT) wins over the config; zero leaves
// the runtime's setting alone.
func tuneRuntime(cfg Config) {
	if os.Getenv("GOGC") == "" && cfg.GCPercent > 0 {
		debug.SetGCPercent(cfg.GCPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" && cfg.MemoryLimit > 0 {
		debug.SetMemoryLimit(cfg.MemoryLimit)
	}
}

// startTLS loads the certificate ([http] tls_*) when HTTPS is on, starts
// checking its files for renewals, and sets the doors' and the peers'
// TLS configurations in cfg.
func (s *Server) startTLS(cfg *Config, reg prometheus.Registerer) error {
	if cfg.TLS.CertFile == "" && cfg.TLS.KeyFile == "" {
		return nil
	}
	tc := cfg.TLS
	tc.Logger, tc.Registerer = s.log, reg
	t, err := edge.NewTLS(tc)
	if err != nil {
		return err
	}
	t.Start()
	s.closer = append(s.closer, t.Stop)
	s.tls = t
	cfg.HTTP.TLS = t.ServerConfig()
	cfg.Cluster.PeerTLS = t.PeerConfig
	return nil
}

// startAccessLogs opens and starts the access logs that are on; each is
// shut down, its lines written, after the doors (release).
func (s *Server) startAccessLogs(cfg Config, reg prometheus.Registerer) error {
	for _, al := range []struct {
		cfg  edge.AccessLogConfig
		name string
		dst  **edge.AccessLog
	}{{cfg.AccessLog, "http", &s.httpLog}, {cfg.NATSAccessLog, "nats", &s.natsLog}} {
		if al.cfg.Path == "" {
			continue
		}
		al.cfg.Logger, al.cfg.Registerer = s.log, reg
		l, err := edge.NewAccessLog(al.cfg, al.name)
		if err != nil {
			return fmt.Errorf("%s.access_log: %w", al.name, err)
		}
		l.Start()
		s.closer = append(s.closer, func() {
			ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
			defer cancel()
			if err := l.Shutdown(ctx); err != nil {
				s.log.Warn("access log: lines not written at shutdown", "log", al.name, "err", err)
			}
		})
		*al.dst = l
	}
	return nil
}

// natsConfig is kvwatch's configuration ([nats]): it carries this node's
// KV entries and the NATS front door, on an embedded server under
// <data_dir>/nats by default.
func natsConfig(cfg Config, log *slog.Logger, reg prometheus.Registerer) kvwatch.Config {
	kcfg := cfg.NATS
	kcfg.Logger, kcfg.Registerer = log, reg
	if kcfg.Embedded() && kcfg.EmbeddedStoreDir == "" {
		kcfg.EmbeddedStoreDir = filepath.Join(cfg.Node.DataDir, "nats")
	}
	return kcfg
}

// startCluster starts cluster mode ([sharding]): the view of the other
// nodes' entries and the placement over it.
func (s *Server) startCluster(cfg Config, kv *kvwatch.KV, reg prometheus.Registerer) (node.Cluster, error) {
	if cfg.NATS.Embedded() && cfg.NATS.EmbeddedClusterName == "" {
		s.log.Warn("sharding is enabled but this node runs a stand-alone embedded NATS server: unless other nodes use it ([nats] url), each node is an island holding its share of the partitions and finding no peer for the rest; set [nats] url, or embedded_cluster")
	}
	view := kvcluster.NewView(kv, s.log)
	if err := view.RegisterMetrics(reg); err != nil {
		return nil, err
	}
	view.Start()
	s.closer = append(s.closer, view.Stop)
	cc := cfg.Cluster
	cc.View, cc.Logger, cc.Registerer = view, s.log, reg
	c, err := cluster.New(cc)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return c, nil
}

// startFeeds starts the feeds of the versions bucket: the change feed
// (versions announced by spangle publish) for an Object Store source
// (objects, nil for another source), and the pins (spangle activate,
// spangle rollback). In a region the change feed is the mirror of the
// Object Store bucket itself, which has a version whole once its
// _SUCCESS arrives (the announcements come through another mirror, maybe
// sooner than the objects).
func (s *Server) startFeeds(cfg Config, kv *kvwatch.KV, objects *objstore.Source) {
	if objects != nil && kv.Region().Enabled() {
		feed := objstore.NewFeed(objects, s.node, s.log, cfg.NATS.ReconnectWait)
		feed.Start()
		s.closer = append(s.closer, feed.Stop)
	} else if objects != nil {
		feed := kvcluster.NewVersionFeed(kv, s.node, s.log)
		feed.Start()
		s.closer = append(s.closer, feed.Stop)
	}
	pins := kvcluster.NewPinFeed(kv, s.node, s.log)
	pins.Start()
	s.closer = append(s.closer, pins.Stop)
}

// startPurger starts the purge hooks ([purge]), if any is configured.
func (s *Server) startPurger(pcfg edge.PurgeConfig, reg prometheus.Registerer) error {
	pcfg.Logger, pcfg.Registerer = s.log, reg
	purger, err := edge.NewPurger(pcfg, s.node)
	if err != nil {
		return err
	}
	if purger.Enabled() {
		purger.Start()
		s.closer = append(s.closer, purger.Stop)
	}
	return nil
}

// newHTTP is the HTTP front door ([http]) on the node.
func (s *Server) newHTTP(cfg Config, reg *prometheus.Registry) (*edge.Server, error) {
	ecfg := cfg.HTTP
	ecfg.Backend, ecfg.Batch, ecfg.SourceError = s.node, s.node, s.node.SourceError
	ecfg.WatchError = s.node.WatchError
	ecfg.List = s.node
	if cfg.Clustered {
		ecfg.PartFiles = s.node // peers copy built partitions (peer token)
	}
	ecfg.NodeName = s.node.Name()
	ecfg.Logger, ecfg.Registerer, ecfg.Gatherer = s.log, reg, reg
	ecfg.SequinsHeaders = cfg.SequinsHeaders
	ecfg.AccessLog = s.httpLog
	return edge.NewServer(ecfg)
}

// natsDoorConfig is the NATS front door's configuration: the HTTP door's
// batch limits (one limit for both doors) on the node.
func (s *Server) natsDoorConfig(cfg Config, clusterName string, reg prometheus.Registerer) edge.NATSConfig {
	ncfg := edge.DefaultNATSConfig()
	ncfg.MaxBatchKeys = cfg.HTTP.MaxBatchKeys
	ncfg.MaxBatchBytes = cfg.HTTP.MaxBatchBytes
	ncfg.MaxListKeys = cfg.HTTP.MaxListKeys
	ncfg.ReplyPrefixes = cfg.NATSReplyPrefixes
	ncfg.Backend, ncfg.List = s.node, s.node
	ncfg.ClusterName = clusterName
	ncfg.Logger, ncfg.Registerer = s.log, reg
	ncfg.AccessLog = s.natsLog
	return ncfg
}

// serve serves the HTTP listener and, with DebugBind, the debug one.
func (s *Server) serve(cfg Config) {
	s.serving = true
	s.wg.Go(func() { s.fail(s.http.Serve(s.ln)) })
	if cfg.DebugBind != "" {
		s.debug = debugServer(cfg, s.node, s.httpLog)
		if s.tls != nil {
			// The same certificate and client CAs as the HTTP door.
			s.debug.TLSConfig = s.tls.ServerConfig()
			s.wg.Go(func() { s.fail(s.debug.ListenAndServeTLS("", "")) })
		} else {
			s.wg.Go(func() { s.fail(s.debug.ListenAndServe()) })
		}
		s.log.Info("debug listener", "bind", cfg.DebugBind, "pprof", cfg.Pprof, "admin", "/admin/pins /admin/dbs", "https", s.tls != nil)
	}
}

// openSource sets cfg.Node.OpenedSource to the sources a node cannot open
// by itself: the Object Store (over kvwatch's connection: its listings
// wait until NATS is up; in a region, the hub's bucket through the
// region's mirror of it, which kvwatch makes) and S3 (credentials from
// [s3], else the environment, the shared AWS files or IAM); nil for a
// local source. It returns the Object Store source, for its feed, or nil.
func openSource(cfg *Config, kv *kvwatch.KV) (*objstore.Source, error) {
	cfg.Node.OpenedSource = nil
	switch root := cfg.Node.Source; {
	case objstore.IsURL(root):
		bucket, err := objstore.ParseURL(root)
		if err != nil {
			return nil, err
		}
		src, err := objstore.New(bucket, kv.SourceJetStream(bucket))
		if err != nil {
			return nil, err
		}
		if reg := cfg.Node.Registerer; reg != nil {
			if err := src.Register(reg); err != nil {
				return nil, err
			}
		}
		cfg.Node.OpenedSource = src
		return src, nil
	case s3.IsURL(root):
		bucket, prefix, err := s3.ParseURL(root)
		if err != nil {
			return nil, err
		}
		src, err := s3.New(bucket, prefix, cfg.S3)
		if err != nil {
			return nil, err
		}
		cfg.Node.OpenedSource = src
	}
	return nil, nil
}

// debugServer is the debug listener: pprof when enabled, and the admin
// API (pins, the removal of a db missing from the source), whose
// requests alog logs (nil: none).
func debugServer(cfg Config, n *node.Node, alog *edge.AccessLog) *http.Server {
	mux := http.NewServeMux()
	if cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	admin := edge.RequireToken(edge.AdminHandler(n), cfg.AdminToken, listenaddr.Loopback(cfg.DebugBind))
	if alog != nil {
		admin = alog.Handler(admin)
	}
	mux.Handle("/admin/pins", admin)
	mux.Handle("/admin/pins/", admin)
	dbs := edge.RequireToken(edge.DBAdminHandler(n), cfg.AdminToken, listenaddr.Loopback(cfg.DebugBind))
	if alog != nil {
		dbs = alog.Handler(dbs)
	}
	mux.Handle("/admin/dbs/", dbs)
	return &http.Server{Addr: cfg.DebugBind, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
}

// Node is the server's node: lookups, status, pins.
func (s *Server) Node() *node.Node { return s.node }

// Addr is the HTTP front door's bound address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Refresh makes the node look for new versions now, reopens the access
// logs (log rotation) and, with HTTPS, reloads the certificate (SIGHUP).
// A certificate that does not load is logged and counted; the previous
// one keeps serving.
func (s *Server) Refresh() {
	s.node.Refresh()
	for _, l := range []*edge.AccessLog{s.httpLog, s.natsLog} {
		if l != nil {
			l.Reopen()
		}
	}
	if s.tls != nil {
		_ = s.tls.Reload() // logged and counted by Reload
	}
}

// Err returns a channel that receives the first error that makes serving
// pointless: a listener failed, or the embedded NATS server cannot start.
// Shutdown is still to be called.
func (s *Server) Err() <-chan error { return s.fatal }

// fail reports a listener's end, unless Shutdown closed it.
func (s *Server) fail(err error) {
	if err == nil || errors.Is(err, http.ErrServerClosed) {
		return
	}
	select {
	case s.fatal <- err:
	default:
	}
}

// Shutdown announces the node is draining, stops taking requests (NATS,
// then HTTP and the debug listener), finishes in-flight ones, stops the
// node (which withdraws its KV entries), the feeds and NATS. Everything
// is released even when ctx ends first; the error then wraps ctx's.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() {
		errs := []error{s.node.Drain(ctx), s.nats.stopFrontDoor(ctx), s.http.Shutdown(ctx)}
		if s.debug != nil {
			err := s.debug.Shutdown(ctx)
			if err != nil {
				_ = s.debug.Close() // ctx ended: its connections go now
			}
			errs = append(errs, err)
		}
		s.wg.Wait() // the listeners are closed: their Serve calls have returned
		errs = append(errs, s.node.Shutdown(ctx))
		s.release()
		errs = append(errs, s.nats.stopKV(ctx))
		if err := errors.Join(errs...); err != nil {
			s.shutdownErr = fmt.Errorf("shutdown: %w", err)
			return
		}
		s.log.Info("stopped")
	})
	return s.shutdownErr
}

// release stops the feeds, the view and the purger, last started first,
// and closes the listener if Start failed before serving.
func (s *Server) release() {
	for i := len(s.closer) - 1; i >= 0; i-- {
		s.closer[i]()
	}
	s.closer = nil
	if !s.serving && s.ln != nil {
		s.ln.Close()
	}
}

// Run starts a node on cfg and serves until ctx ends, then shuts it down
// within cfg.ShutdownTimeout. It returns the error that stopped it early,
// or the shutdown's.
func Run(ctx context.Context, cfg Config) error {
	s, err := Start(cfg)
	if err != nil {
		return err
	}
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-s.Err():
		s.log.Error("stopping", "err", runErr)
	}
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	return errors.Join(runErr, s.Shutdown(sctx))
}
