package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/spangledb/spangle/node/source"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/kvwatch"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/source/objstore"
	"github.com/spangledb/spangle/node/source/s3"
)

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	configPath := fs.String("config", "", "config file (default: spangle.toml in the working directory, if any)")
	sourceRoot := fs.String("source", "", "source root: a directory, file:///path, nats-object://BUCKET or s3://BUCKET/PREFIX (overrides the config's source)")
	bind := fs.String("bind", "", "HTTP listen address (default 0.0.0.0:9599)")
	dataDir := fs.String("data-dir", "", "where partitions are stored (overrides data_dir)")
	fs.StringVar(dataDir, "local-store", "", "alias of --data-dir")
	debugBind := fs.String("debug-bind", "", "pprof listen address (off by default)")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	shutdownTimeout := fs.Duration("shutdown-timeout", 30*time.Second, "how long SIGTERM waits for in-flight requests")
	natsURL := fs.String("nats", "", "NATS server URLs, comma-separated (default: an embedded server)")
	natsListen := fs.String("nats-listen", "", "embedded NATS server's client address (default 127.0.0.1:4222)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		// Flags after a positional would be ignored silently.
		return fmt.Errorf("serve takes no arguments (got %q): name the config with --config", fs.Args())
	}

	log, err := newLogger(*logFormat, *logLevel)
	if err != nil {
		return err
	}
	cfg := defaultConfig()
	path, err := findConfig(*configPath)
	if err != nil {
		return err
	}
	if path != "" {
		if err := loadConfig(path, &cfg); err != nil {
			return err
		}
	}
	override := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	override(&cfg.node.Source, *sourceRoot)
	override(&cfg.node.DataDir, *dataDir)
	override(&cfg.bind, *bind)
	override(&cfg.debugBind, *debugBind)
	override(&cfg.nats.EmbeddedListen, *natsListen)
	if *natsURL != "" {
		cfg.nats.URLs = splitList(*natsURL)
	}

	// The environment (GOGC, GOMEMLIMIT) wins over the config.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(cfg.gcPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" && cfg.memoryLimit > 0 {
		debug.SetMemoryLimit(cfg.memoryLimit)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg.node.Logger = log
	cfg.node.Registerer = reg

	// NATS: kvwatch (an embedded server under <data_dir>/nats by default)
	// carries this node's KV entries and the NATS front door.
	kcfg := cfg.nats
	kcfg.Logger = log
	kcfg.Registerer = reg
	if kcfg.Embedded() && kcfg.EmbeddedStoreDir == "" {
		kcfg.EmbeddedStoreDir = filepath.Join(cfg.node.DataDir, "nats")
	}
	if !source.ValidName(kcfg.ClusterName) {
		return fmt.Errorf("nats.cluster_name %q must match ^[-_a-zA-Z0-9]+$", kcfg.ClusterName)
	}
	kv, err := kvwatch.New(kcfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.bind)
	if err != nil {
		return err
	}
	cfg.node.Advertiser = edge.NewKVAdvertiser(kv)
	cfg.node.AdvertiseSubjects = edge.SubjectPrefix(kcfg.ClusterName)
	cfg.node.AdvertiseAddress = advertisedAddress(ln.Addr(), cfg.advertisedHostname)
	cfg.node.BinaryVersion = version
	var view *edge.KVClusterView
	if cfg.node.Cluster.Enabled {
		if cfg.nats.Embedded() && cfg.nats.EmbeddedClusterName == "" {
			log.Warn("sharding is enabled but this node runs a stand-alone embedded NATS server: unless other nodes use it ([nats] url), each node is an island holding its share of the partitions and finding no peer for the rest; set [nats] url, or embedded_cluster")
		}
		view = edge.NewKVClusterView(kv, log)
		if err := view.RegisterMetrics(reg); err != nil {
			return err
		}
		view.Start()
		defer view.Stop()
		cfg.node.Cluster.View = view
	}
	objectSource := objstore.IsURL(cfg.node.Source)
	if objectSource {
		// The Object Store source uses kvwatch's connection: its listings
		// wait until NATS is up.
		bucket, err := objstore.ParseURL(cfg.node.Source)
		if err != nil {
			ln.Close()
			return err
		}
		cfg.node.OpenedSource, err = objstore.New(bucket, kvJetStream(kv))
		if err != nil {
			ln.Close()
			return err
		}
	}
	if s3.IsURL(cfg.node.Source) {
		// The S3 source: credentials from [s3], else the environment, the
		// shared AWS files or IAM.
		bucket, prefix, err := s3.ParseURL(cfg.node.Source)
		if err != nil {
			ln.Close()
			return err
		}
		cfg.node.OpenedSource, err = s3.New(bucket, prefix, cfg.s3)
		if err != nil {
			ln.Close()
			return err
		}
	}
	n, err := node.New(cfg.node)
	if err != nil {
		ln.Close()
		return err
	}
	if objectSource {
		// The change feed: versions announced by spangle publish.
		feed := edge.NewVersionFeed(kv, n, log)
		feed.Start()
		defer feed.Stop()
	}
	// Pins (spangle activate, spangle rollback) from the versions bucket.
	pins := edge.NewPinFeed(kv, n, log)
	pins.Start()
	defer pins.Stop()
	pcfg := cfg.purge
	pcfg.Logger = log
	pcfg.Registerer = reg
	purger, err := edge.NewPurger(pcfg, n)
	if err != nil {
		return err
	}
	if purger.Enabled() {
		purger.Start()
		defer purger.Stop()
	}
	ecfg := cfg.http
	ecfg.Backend = n
	ecfg.NodeName = n.Name()
	ecfg.Logger = log
	ecfg.Registerer = reg
	ecfg.Gatherer = reg
	ecfg.SequinsHeaders = cfg.sequinsHeaders
	srv, err := edge.NewServer(ecfg)
	if err != nil {
		ln.Close()
		return err
	}
	if err := n.Start(); err != nil {
		ln.Close()
		return err
	}
	ncfg := edge.DefaultNATSConfig()
	ncfg.MaxBatchKeys = cfg.http.MaxBatchKeys // one batch limit for both doors
	ncfg.MaxBatchBytes = cfg.http.MaxBatchBytes
	ncfg.Backend = n
	ncfg.ClusterName = kcfg.ClusterName
	ncfg.Logger = log
	ncfg.Registerer = reg
	nd := startNATS(log, kv, ncfg)
	log.Info("spangle serving", "version", version, "bind", ln.Addr().String(), "source", cfg.node.Source,
		"data_dir", cfg.node.DataDir, "config", path)

	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	var debug *http.Server
	if cfg.debugBind != "" {
		mux := http.NewServeMux()
		if cfg.pprof {
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
			mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		}
		mux.Handle("/admin/pins", edge.AdminHandler(n))
		mux.Handle("/admin/pins/", edge.AdminHandler(n))
		debug = &http.Server{Addr: cfg.debugBind, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { errc <- debug.ListenAndServe() }()
		log.Info("debug listener", "bind", cfg.debugBind, "pprof", cfg.pprof, "admin", "/admin/pins")
	}

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	for {
		select {
		case err := <-errc:
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				shutdown(log, srv, n, nd, debug, *shutdownTimeout)
				return err
			}
		case err := <-nd.fatal:
			log.Error("embedded NATS server cannot start; stopping", "err", err)
			shutdown(log, srv, n, nd, debug, *shutdownTimeout)
			return err
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				log.Info("SIGHUP: looking for new versions")
				n.Refresh()
				continue
			}
			log.Info("shutting down", "signal", sig.String())
			return shutdown(log, srv, n, nd, debug, *shutdownTimeout)
		}
	}
}

// shutdown announces the node is draining, stops taking requests (NATS,
// then HTTP), finishes in-flight ones, then stops the node (which
// withdraws its KV entries) and NATS.
func shutdown(log *slog.Logger, srv *edge.Server, n *node.Node, nd *natsDoor, debug *http.Server, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	errs := []error{n.Drain(ctx), nd.stopFrontDoor(ctx), srv.Shutdown(ctx)}
	if debug != nil {
		errs = append(errs, debug.Shutdown(ctx))
	}
	errs = append(errs, n.Shutdown(ctx), nd.stopKV(ctx))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

func newLogger(format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: want text or json, not %q", format)
}
