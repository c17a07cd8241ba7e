package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spangledb/spangle"
)

const readyUsage = `usage: spangle ready [--http URL | --config FILE [--data-dir DIR]] [--timeout D] [--cacert FILE | --insecure]`

// probeFile, in the data dir, holds the URL a running spangle serve
// answers /readyz at (its scheme and the address it bound): spangle ready
// reads it, so that the container image's HEALTHCHECK follows a --bind or
// TLS given to serve.
const probeFile = "http.url"

// ready runs "spangle ready": GET <node>/readyz, nil when it answers 200.
// It is the probe of images without a shell or curl (the container
// image's HEALTHCHECK): the exit status is the answer. Without --http it
// asks the node the configuration names, as serve reads it (--config, else
// spangle.toml here): the URL serve wrote in <data_dir>/http.url at its
// start, else one made of bind (an unspecified host is loopback) and
// https when [http] tls_cert is set. Such a probe of this host's node over
// HTTPS, unless --cacert or --insecure say otherwise, skips the check of
// its certificate's names (issued for the node's public name, not
// loopback) and presents tls_cert as a client certificate
// (tls_client_ca).
func ready(args []string, stderr io.Writer) error {
	fs := newFlagSet("ready", readyUsage, stderr)
	node := fs.String("http", "", "the node's HTTP address (default: the configuration's, else "+spangle.LocalURL+")")
	configPath := fs.String("config", "", "config file of the node (default: spangle.toml in the working directory, if any)")
	dataDir := fs.String("data-dir", "", "the node's data dir, where serve writes "+probeFile+" (overrides data_dir)")
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for the answer")
	tf := addTLSFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return badArgs(fs, "ready takes no arguments (got %q)", fs.Args())
	}
	client, err := tf.client()
	if err != nil {
		return err
	}
	u := *node
	if u == "" {
		var tc *tls.Config
		if u, tc, err = configuredProbe(*configPath, *dataDir); err != nil {
			return err
		}
		if tc != nil && tf.cacert == "" && !tf.insecure {
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.TLSClientConfig = tc
			client = &http.Client{Transport: tr}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	u = strings.TrimSuffix(u, "/") + "/readyz"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s %s", u, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// configuredProbe returns the URL of the node the configuration at
// configPath (FindConfig's) and dataDir describe, and, for HTTPS, the TLS
// configuration of a probe of it on this host.
func configuredProbe(configPath, dataDir string) (string, *tls.Config, error) {
	cfg := spangle.DefaultConfig()
	path, err := spangle.FindConfig(configPath)
	if err == nil && path != "" {
		err = spangle.LoadConfig(path, &cfg)
	}
	if err != nil {
		return "", nil, err
	}
	if dataDir != "" {
		cfg.Node.DataDir = dataDir
	}
	u, err := readProbeFile(filepath.Join(cfg.Node.DataDir, probeFile))
	if err != nil {
		return "", nil, err
	}
	https := cfg.TLS.CertFile != ""
	if u == "" {
		if u, err = probeURL(cfg.Bind, https); err != nil {
			return "", nil, fmt.Errorf("bind %q: %w", cfg.Bind, err)
		}
	}
	if !strings.HasPrefix(u, "https://") {
		return u, nil, nil
	}
	// This host's own node: its certificate names its public name, not
	// loopback; the handshake still needs its key.
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: true} //nolint:gosec // a probe of the node on this host, over loopback
	if cfg.TLS.CertFile != "" && cfg.TLS.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLS.CertFile, cfg.TLS.KeyFile)
		if err != nil {
			return "", nil, fmt.Errorf("client certificate for tls_client_ca: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return u, tc, nil
}

// readProbeFile returns the URL in path, "" when there is no such file.
// It is bounded and must be an http(s) URL of a loopback host.
func readProbeFile(path string) (string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 512))
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(b))
	p, err := url.Parse(s)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || !isLoopback(p.Hostname()) {
		return "", fmt.Errorf("%s: %q is not an http(s) URL on loopback", path, s)
	}
	return s, nil
}

// probeURL is the URL of a node on this host bound to bind: an
// unspecified host (0.0.0.0, ::, none) becomes loopback.
func probeURL(bind string, https bool) (string, error) {
	host, port, err := net.SplitHostPort(bind)
	if err != nil {
		return "", err
	}
	switch a, err := netip.ParseAddr(host); {
	case host == "" || err == nil && a.Is4() && a.IsUnspecified():
		host = "127.0.0.1"
	case err == nil && a.IsUnspecified():
		host = "::1"
	}
	scheme := "http"
	if https {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port), nil
}

// isLoopback reports whether host is a loopback address or localhost.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// writeProbeFile records in <data_dir>/http.url where s answers /readyz,
// for spangle ready; a failure is logged, not fatal (the probe then
// derives the URL from the configuration).
func writeProbeFile(cfg spangle.Config, s *spangle.Server) {
	u, err := probeURL(s.Addr().String(), cfg.TLS.CertFile != "")
	if err == nil {
		path := filepath.Join(cfg.Node.DataDir, probeFile)
		tmp := path + ".tmp"
		if err = os.WriteFile(tmp, []byte(u+"\n"), 0o644); err == nil {
			err = os.Rename(tmp, path)
		}
	}
	if err != nil && cfg.Logger != nil {
		cfg.Logger.Warn("cannot record the probe URL for spangle ready", "file", probeFile, "err", err)
	}
}
