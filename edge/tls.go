package edge

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TLSConfig configures HTTPS on the doors: the certificate and key a
// node serves (and presents to peers), the CAs it trusts, and how the
// certificate is reloaded. spangle's [http] tls_* keys.
type TLSConfig struct {
	// CertFile and KeyFile are PEM files: the certificate chain (leaf
	// first) and its private key. Both required; no default.
	CertFile string
	KeyFile  string
	// ClientCAFile, when set, is a PEM file of the CAs whose client
	// certificates the doors require and verify (mutual TLS, for peers
	// and clients alike). Default "": no client certificate asked.
	ClientCAFile string
	// PeerCAFile, when set, is a PEM file of the CAs a node trusts for its
	// peers' certificates, beside the system's. Default "": the system's
	// pool only.
	PeerCAFile string
	// ReloadCheck is how often the certificate, key and CA files are
	// checked for a change (size or modification time); a change reloads
	// them. Default 10s.
	ReloadCheck time.Duration
	// Logger receives reloads and their failures. Default nil: discard.
	Logger *slog.Logger
	// Registerer is where the TLS metrics are registered. Default nil:
	// none.
	Registerer prometheus.Registerer
}

// DefaultTLSConfig returns a TLSConfig with every default set and no
// files.
func DefaultTLSConfig() TLSConfig {
	return TLSConfig{ReloadCheck: 10 * time.Second}
}

// Validate reports the first invalid field, wrapping ErrInvalidConfig.
func (c TLSConfig) Validate() error {
	switch {
	case c.CertFile == "" && c.KeyFile == "":
		return fmt.Errorf("%w: http.tls_cert and http.tls_key are empty: TLS needs both", ErrInvalidConfig)
	case c.CertFile == "":
		return fmt.Errorf("%w: http.tls_cert is empty (tls_key is set)", ErrInvalidConfig)
	case c.KeyFile == "":
		return fmt.Errorf("%w: http.tls_key is empty (tls_cert is set)", ErrInvalidConfig)
	case c.ReloadCheck <= 0:
		return fmt.Errorf("%w: ReloadCheck %v is not positive", ErrInvalidConfig, c.ReloadCheck)
	}
	return nil
}

// TLS serves a certificate from files and reloads it without a restart:
// on Reload (spangle serve calls it on SIGHUP) and when the files
// change (checked every ReloadCheck from Start to Stop). The CA files
// (ClientCAFile, PeerCAFile) are reloaded with it. The handshakes read
// the current certificate and CAs from atomic pointers, so connections
// in flight keep theirs and new ones get the new ones; a renewed
// certificate that does not load (unreadable, not PEM, key not
// matching, expired), or a CA file without a certificate, is refused,
// logged and counted, and the previous one keeps serving. Safe for
// concurrent use.
type TLS struct {
	cfg  TLSConfig
	log  *slog.Logger
	cert atomic.Pointer[tls.Certificate]
	// clientConf is the doors' configuration with the current client CAs
	// (served by ServerConfig's GetConfigForClient); nil without
	// ClientCAFile. Never modified once stored.
	clientConf atomic.Pointer[tls.Config]
	// peerCAs is the pool peers' certificates are verified against
	// (PeerCAFile and the system's); nil without PeerCAFile: the
	// system's pool.
	peerCAs atomic.Pointer[x509.CertPool]

	reloads  *prometheus.CounterVec // spangle_tls_reloads_total{result}
	notAfter prometheus.Gauge       // spangle_tls_cert_not_after_seconds

	mu   sync.Mutex // guards seen, serialises loads
	seen fileStamp  // the files as last loaded or refused

	wg       sync.WaitGroup
	quit     chan struct{}
	stopOnce sync.Once
}

// fileStamp is what a check compares: the size and time of the
// certificate, key, client CA and peer CA files (zero for a file not
// configured).
type fileStamp [4]struct {
	size int64
	mod  time.Time
}

// stamp returns the files' stamp, or the error of one that cannot be
// read (a load reports it, naming its key).
func stamp(cfg TLSConfig) (fileStamp, error) {
	var st fileStamp
	for i, f := range [...]string{cfg.CertFile, cfg.KeyFile, cfg.ClientCAFile, cfg.PeerCAFile} {
		if f == "" {
			continue
		}
		fi, err := os.Stat(f)
		if err != nil {
			return st, err
		}
		st[i].size, st[i].mod = fi.Size(), fi.ModTime()
	}
	return st, nil
}

// NewTLS loads cfg's certificate, key and CAs, and registers the TLS
// metrics. Every file that is missing, unreadable or not what it should
// be is reported, in one error naming each one's key (http.tls_cert,
// http.tls_key, http.tls_client_ca, http.tls_peer_ca). It starts
// nothing.
func NewTLS(cfg TLSConfig) (*TLS, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	t := &TLS{cfg: cfg, log: cfg.Logger, quit: make(chan struct{})}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	t.seen, _ = stamp(cfg) // a missing file fails its load, naming it
	if err := errors.Join(t.loadCert(), t.loadClientCAs(), t.loadPeerCAs()); err != nil {
		return nil, err
	}
	t.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "spangle_tls_reloads_total",
		Help: "Reloads of the HTTPS certificate and CA files by result: ok (serving the new ones) or failed (a file refused and its previous contents kept; the log says why).",
	}, []string{"result"})
	t.notAfter = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "spangle_tls_cert_not_after_seconds",
		Help: "When the served HTTPS certificate expires (Unix time).",
	})
	if cfg.Registerer != nil {
		var err error
		if t.reloads, err = register(cfg.Registerer, t.reloads); err != nil {
			return nil, err
		}
		if t.notAfter, err = register(cfg.Registerer, t.notAfter); err != nil {
			return nil, err
		}
	}
	t.reloads.WithLabelValues("ok")
	t.reloads.WithLabelValues("failed")
	t.notAfter.Set(float64(t.cert.Load().Leaf.NotAfter.Unix()))
	return t, nil
}

// loadCert loads the certificate and key and serves them; on error the
// current ones stay.
func (t *TLS) loadCert() error {
	cert, err := loadCert(t.cfg.CertFile, t.cfg.KeyFile, time.Now())
	if err != nil {
		return err
	}
	t.cert.Store(cert)
	return nil
}

// loadClientCAs loads ClientCAFile, if set, into the doors'
// configuration; on error the current CAs stay.
func (t *TLS) loadClientCAs() error {
	if t.cfg.ClientCAFile == "" {
		return nil
	}
	pool, err := loadPool("http.tls_client_ca", t.cfg.ClientCAFile, nil)
	if err != nil {
		return err
	}
	c := t.baseServerConfig()
	c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
	t.clientConf.Store(c)
	return nil
}

// loadPeerCAs loads PeerCAFile, if set, beside the system's CAs; on
// error the current pool stays.
func (t *TLS) loadPeerCAs() error {
	if t.cfg.PeerCAFile == "" {
		return nil
	}
	sys, err := x509.SystemCertPool()
	if err != nil {
		sys = x509.NewCertPool()
	}
	pool, err := loadPool("http.tls_peer_ca", t.cfg.PeerCAFile, sys)
	if err != nil {
		return err
	}
	t.peerCAs.Store(pool)
	return nil
}

// loadCert reads and checks a certificate chain and its key: they must
// parse, match, and the leaf must be valid at now.
func loadCert(certFile, keyFile string, now time.Time) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("edge: http.tls_cert: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("edge: http.tls_key: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("edge: http.tls_cert %s and http.tls_key %s: %w", certFile, keyFile, err)
	}
	// X509KeyPair parses the leaf into cert.Leaf (Go 1.23+).
	if cert.Leaf == nil {
		return nil, fmt.Errorf("edge: http.tls_cert %s: no certificate", certFile)
	}
	if now.After(cert.Leaf.NotAfter) || now.Before(cert.Leaf.NotBefore) {
		return nil, fmt.Errorf("edge: http.tls_cert %s: valid from %s to %s, not now", certFile,
			cert.Leaf.NotBefore.UTC().Format(time.RFC3339), cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return &cert, nil
}

// loadPool adds the PEM certificates of file to pool (a new pool if nil).
func loadPool(key, file string, pool *x509.CertPool) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("edge: %s: %w", key, err)
	}
	if pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("edge: %s %s: no PEM certificate in it", key, file)
	}
	return pool, nil
}

// Certificate returns the certificate served now. The caller must not
// modify it.
func (t *TLS) Certificate() *tls.Certificate { return t.cert.Load() }

// ServerConfig returns a new tls.Config for a door: TLS 1.2 at least,
// HTTP/2 and HTTP/1.1 offered by ALPN, the current certificate on each
// handshake and, with ClientCAFile, client certificates required and
// verified against the current client CAs (GetConfigForClient).
func (t *TLS) ServerConfig() *tls.Config {
	c := t.baseServerConfig()
	if cc := t.clientConf.Load(); cc != nil {
		c.ClientCAs, c.ClientAuth = cc.ClientCAs, cc.ClientAuth
		c.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return t.clientConf.Load(), nil
		}
	}
	return c
}

// baseServerConfig is ServerConfig without client certificates.
func (t *TLS) baseServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return t.cert.Load(), nil
		},
	}
}

// PeerConfig returns a new tls.Config for requests to peers: their
// certificates verified against the current PeerCAFile and the system's
// CAs, and this node's certificate presented when a peer asks for one.
// Call it for each new connection (proxy.Config.TLS does) so that a
// reloaded PeerCAFile applies; the caller may modify what it returns.
func (t *TLS) PeerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		RootCAs:    t.peerCAs.Load(),
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return t.cert.Load(), nil
		},
	}
}

// Reload loads the certificate, the key and the CA files again and
// serves them from the next handshake on. A file that does not load
// leaves what it replaces serving; the failure is logged, counted and
// returned (each failed file named), and the others are loaded still.
func (t *TLS) Reload() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, _ := stamp(t.cfg) // a missing file fails its load, naming it
	return t.reloadLocked(st)
}

// reloadLocked loads the files, whose stamp is st.
func (t *TLS) reloadLocked(st fileStamp) error {
	t.seen = st // a refused file is not tried again until one changes
	err := t.loadCert()
	if err != nil {
		t.log.Error("edge: TLS certificate not reloaded; the previous one keeps serving", "err", err,
			"serving_not_after", t.cert.Load().Leaf.NotAfter)
	} else {
		cert := t.cert.Load()
		t.notAfter.Set(float64(cert.Leaf.NotAfter.Unix()))
		t.log.Info("edge: TLS certificate reloaded", "subject", cert.Leaf.Subject.String(),
			"not_after", cert.Leaf.NotAfter, "serial", cert.Leaf.SerialNumber.String())
	}
	for _, ca := range []struct {
		key, file string
		load      func() error
	}{{"http.tls_client_ca", t.cfg.ClientCAFile, t.loadClientCAs}, {"http.tls_peer_ca", t.cfg.PeerCAFile, t.loadPeerCAs}} {
		if ca.file == "" {
			continue
		}
		if cerr := ca.load(); cerr != nil {
			t.log.Error("edge: TLS CA file not reloaded; the previous CAs stay trusted", "key", ca.key, "err", cerr)
			err = errors.Join(err, cerr)
		}
	}
	if err != nil {
		t.reloads.WithLabelValues("failed").Inc()
		return err
	}
	t.reloads.WithLabelValues("ok").Inc()
	return nil
}

// check reloads the files if their stamp changed since the last load.
func (t *TLS) check() {
	st, err := stamp(t.cfg)
	if err != nil {
		return // a file being replaced; the next check sees it
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if st != t.seen {
		_ = t.reloadLocked(st) // logged and counted
	}
}

// Start starts checking the files every ReloadCheck, until Stop.
func (t *TLS) Start() {
	t.wg.Go(func() {
		tick := time.NewTicker(t.cfg.ReloadCheck)
		defer tick.Stop()
		for {
			select {
			case <-t.quit:
				return
			case <-tick.C:
				t.check()
			}
		}
	})
}

// Stop stops the checks and waits for them; idempotent.
func (t *TLS) Stop() {
	t.stopOnce.Do(func() { close(t.quit) })
	t.wg.Wait()
}
