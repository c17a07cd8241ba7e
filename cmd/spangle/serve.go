package main

import (
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spangledb/spangle"
)

// serve runs a node (spangle.Start) on the config file and the flags, until
// SIGINT or SIGTERM; SIGHUP looks for new versions (and reloads the TLS
// certificate with HTTPS).
func serve(args []string, stderr io.Writer) error {
	fs := newFlagSet("serve", "usage: spangle serve [--config FILE] [--source DIR|URL] [--bind ADDR] [--data-dir DIR] [flags]", stderr)
	configPath := fs.String("config", "", "config file (default: spangle.toml in the working directory, if any)")
	sourceRoot := fs.String("source", "", "source root: a directory, file:///path, nats-object://BUCKET or s3://BUCKET/PREFIX (overrides the config's source)")
	bind := fs.String("bind", "", "HTTP listen address (default "+spangle.DefaultConfig().Bind+")")
	dataDir := fs.String("data-dir", "", "where partitions are stored (overrides data_dir)")
	fs.StringVar(dataDir, "local-store", "", "alias of --data-dir")
	debugBind := fs.String("debug-bind", "", "pprof listen address (off by default)")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	shutdownTimeout := fs.Duration("shutdown-timeout", spangle.DefaultConfig().ShutdownTimeout, "how long SIGTERM waits for in-flight requests")
	natsURL := fs.String("nats", "", "NATS server URLs, comma-separated (default: an embedded server)")
	natsListen := fs.String("nats-listen", "", "embedded NATS server's client address (default 127.0.0.1:4222)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 { // flags after a positional would be ignored silently
		return usagef("serve takes no arguments (got %q): name the config with --config", fs.Args())
	}
	cfg := spangle.DefaultConfig()
	path, err := spangle.FindConfig(*configPath)
	if err == nil && path != "" {
		err = spangle.LoadConfig(path, &cfg)
	}
	if err != nil {
		return err
	}
	if cfg.Logger, err = newLogger(*logFormat, *logLevel); err != nil {
		return err
	}
	for dst, v := range map[*string]string{&cfg.Node.Source: *sourceRoot, &cfg.Node.DataDir: *dataDir,
		&cfg.Bind: *bind, &cfg.DebugBind: *debugBind, &cfg.NATS.EmbeddedListen: *natsListen} {
		if v != "" {
			*dst = v
		}
	}
	if *natsURL != "" {
		cfg.NATS.URLs = spangle.SplitList(*natsURL)
	}
	cfg.ShutdownTimeout, cfg.Version = *shutdownTimeout, release()
	if cfg.Node.Source == "" {
		return badArgs(fs, "no source: give --source DIR|URL, or source = \"…\" in the config file (%s)", configName(path))
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	// Signals are caught before the node starts: a SIGHUP sent once it
	// serves must never find the default action (exit) in place.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	s, err := spangle.Start(cfg)
	if err != nil {
		return err
	}
	// spangle ready (the image's HEALTHCHECK) follows --bind and TLS.
	writeProbeFile(cfg, s)
	sd := &sdNotifier{log: cfg.Logger} // systemd's Type=notify (sdnotify.go)
	loaded := s.Node().Loaded()
	for {
		select {
		case <-loaded:
			loaded = nil
			sd.loaded(s)
		case err := <-s.Err():
			cfg.Logger.Error("stopping", "err", err)
			sd.stopping()
			return errors.Join(err, shutdown(s, cfg.ShutdownTimeout))
		case sig := <-sigs:
			if sig != syscall.SIGHUP {
				cfg.Logger.Info("shutting down", "signal", sig.String())
				sd.stopping()
				return shutdown(s, cfg.ShutdownTimeout)
			}
			cfg.Logger.Info("SIGHUP: looking for new versions", "tls_reload", cfg.TLS.CertFile != "")
			sd.reloading(s)
		}
	}
}

// configName names the config file read, for the messages: its path, or
// that there was none.
func configName(path string) string {
	if path == "" {
		return "no config file read"
	}
	return "read " + path
}
