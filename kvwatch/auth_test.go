package kvwatch

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/spangledb/spangle/kvwatch/natstest"
)

// The tests in this file run the external-server security options (TLS
// with client certificates, NKey, creds files) against real nats-servers
// configured to demand them.

// checkWorks runs two KVs with c against the server: both start, each
// publishes an entry and sees the other's.
func checkWorks(t *testing.T, c Config) {
	t.Helper()
	a := startKV(t, c)
	b := startKV(t, c)
	ctx := ctxT(t)
	if err := a.Publish(ctx, Nodes, "na", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(ctx, Versions, "db", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	for _, k := range []*KV{a, b} {
		waitFor(t, 3*time.Second, "entries seen", func() error {
			if err := hasValue(k, Nodes, "na", "a")(); err != nil {
				return err
			}
			return hasValue(k, Versions, "db", "v1")()
		})
	}
}

// startFails starts a KV with c, which the server must refuse, and returns
// Start's error. Start must leave the KV not started, and give up when its
// context ends, not hang: a refused connection is retried until then, like
// an unreachable server, so the error wraps context.DeadlineExceeded.
func startFails(t *testing.T, c Config) error {
	t.Helper()
	k := newKV(t, c)
	// Long enough for a refused connection's error to be recorded on a
	// loaded machine (a TLS handshake under -race at a load of 30 took
	// most of a second), which the error must then name.
	const limit = 3 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	begin := time.Now()
	err := k.Start(ctx)
	if took := time.Since(begin); took > limit+time.Second {
		t.Errorf("Start returned %v after its %v deadline", took-limit, limit)
	}
	if err == nil {
		t.Fatal("Start succeeded, want a failure")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Start = %v, want DeadlineExceeded", err)
	}
	if k.Conn() != nil {
		t.Error("failed Start left a connection")
	}
	if !k.Snapshot().Stale() {
		t.Error("failed Start: snapshot not stale")
	}
	select {
	case <-k.Ready():
		t.Error("failed Start: Ready closed")
	default:
	}
	return err
}

// wantErr fails unless err's message contains one of the words
// (case-insensitive).
func wantErr(t *testing.T, err error, words ...string) {
	t.Helper()
	msg := strings.ToLower(err.Error())
	for _, w := range words {
		if strings.Contains(msg, strings.ToLower(w)) {
			return
		}
	}
	t.Errorf("error %q mentions none of %q", err, words)
}

// writeFile writes data to name in dir and returns the path.
func writeFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// testCA is a certificate authority for tests, its certificate in a PEM
// file.
type testCA struct {
	dir  string
	file string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestCA(t testing.TB, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := certTemplate(t, name)
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	return &testCA{
		dir:  dir,
		file: writeFile(t, dir, name+"-ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		cert: cert,
		key:  key,
	}
}

// issue signs a certificate for name, a server certificate for 127.0.0.1
// or a client one, and returns its certificate and key files.
func (ca *testCA) issue(t testing.TB, name string, isServer bool) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := certTemplate(t, name)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	if isServer {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile = writeFile(t, ca.dir, name+".pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	keyFile = writeFile(t, ca.dir, name+"-key.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	return certFile, keyFile
}

func certTemplate(t testing.TB, name string) *x509.Certificate {
	t.Helper()
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		t.Fatal(err)
	}
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
}

// TestAuthTLS: a server that requires TLS and verifies client certificates
// against its CA accepts a KV with the CA and a client certificate, and
// refuses one without a client certificate, with a client certificate of
// another CA, or that does not trust the server's CA.
func TestAuthTLS(t *testing.T) {
	ca := newTestCA(t, "spangle-test")
	serverCert, serverKey := ca.issue(t, "server", true)
	clientCert, clientKey := ca.issue(t, "client", false)
	other := newTestCA(t, "other")
	otherCert, otherKey := other.issue(t, "client", false)

	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{
		CertFile: serverCert, KeyFile: serverKey, CaFile: ca.file, Verify: true, Timeout: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	s := natstest.RunServer(t, &server.Options{TLS: true, TLSVerify: true, TLSConfig: tc, TLSTimeout: 2})

	good := testConfig(t, s.ClientURL())
	good.TLSCAFile, good.TLSCertFile, good.TLSKeyFile = ca.file, clientCert, clientKey
	t.Run("client certificate", func(t *testing.T) { checkWorks(t, good) })

	t.Run("skip verify with client certificate", func(t *testing.T) {
		c := good
		c.TLSCAFile, c.TLSInsecureSkipVerify = "", true
		checkWorks(t, c)
	})

	// The reasons are the TLS alert the server sends, or, if the client
	// wrote before it read the alert (TLS 1.3 checks the client certificate
	// after the client's handshake is done), the client's TLS error for the
	// connection the server closed; or the client's verification error. A
	// client certificate of another CA is not even sent: it does not match
	// the CAs the server asks for.
	refused := []string{
		"tls: certificate required", "tls: bad certificate", "tls: unknown certificate authority",
		"tls error: connection closed by remote after TLS handshake",
	}
	untrusted := []string{"x509: certificate signed by unknown authority"}
	tests := []struct {
		name   string
		change func(*Config)
		want   []string
	}{
		{"no client certificate", func(c *Config) { c.TLSCertFile, c.TLSKeyFile = "", "" }, refused},
		{"client certificate of another CA", func(c *Config) { c.TLSCertFile, c.TLSKeyFile = otherCert, otherKey }, refused},
		{"server CA not trusted", func(c *Config) { c.TLSCAFile = other.file }, untrusted},
		// The client switches to TLS when the server requires it, and
		// then checks the server against the system's CAs.
		{"no TLS options", func(c *Config) { c.TLSCAFile, c.TLSCertFile, c.TLSKeyFile = "", "", "" }, untrusted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.change(&c)
			wantErr(t, startFails(t, c), tt.want...)
		})
	}
}

// TestAuthNKey: a server with an NKey user accepts a KV with that user's
// seed (JetStream in the global account) and refuses another seed.
func TestAuthNKey(t *testing.T) {
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := user.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	s := natstest.RunServer(t, &server.Options{Nkeys: []*server.NkeyUser{{Nkey: pub}}})

	seedFile := func(kp nkeys.KeyPair) string {
		seed, err := kp.Seed()
		if err != nil {
			t.Fatal(err)
		}
		return writeFile(t, t.TempDir(), "user.nk", seed)
	}
	c := testConfig(t, s.ClientURL())
	c.NKeySeedFile = seedFile(user)
	t.Run("known seed", func(t *testing.T) { checkWorks(t, c) })

	t.Run("unknown seed", func(t *testing.T) {
		stranger, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		c := c
		c.NKeySeedFile = seedFile(stranger)
		wantErr(t, startFails(t, c), "authorization violation")
	})
	t.Run("no credentials", func(t *testing.T) {
		c := c
		c.NKeySeedFile = ""
		wantErr(t, startFails(t, c), "authorization violation")
	})
}

// TestAuthRefusedThenAccepted: a node whose credentials a restarted server
// refuses keeps trying, however often it is refused, and reconnects once
// the server accepts them again (credentials rotated on the server first,
// say). The NATS client's default gives up after the second refusal.
func TestAuthRefusedThenAccepted(t *testing.T) {
	nkeyUser := func() (pub string, seed []byte) {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		if pub, err = kp.PublicKey(); err != nil {
			t.Fatal(err)
		}
		if seed, err = kp.Seed(); err != nil {
			t.Fatal(err)
		}
		return pub, seed
	}
	pub, seed := nkeyUser()
	otherPub, _ := nkeyUser()
	port, storeDir := natstest.FreePort(t), t.TempDir()
	run := func(user string) *server.Server {
		return natstest.RunServer(t, &server.Options{Port: port, StoreDir: storeDir, Nkeys: []*server.NkeyUser{{Nkey: user}}})
	}

	s := run(pub)
	c := testConfig(t, s.ClientURL())
	c.NKeySeedFile = writeFile(t, t.TempDir(), "user.nk", seed)
	k := startKV(t, c)
	nc := k.Conn()
	s.Shutdown()
	s.WaitForShutdown()

	s = run(otherPub)
	refusals := nc.Stats().Reconnects // attempts that reached a server
	waitFor(t, 5*time.Second, "refused several times", func() error {
		n, err := nc.Stats().Reconnects-refusals, nc.LastError()
		if nc.IsClosed() {
			t.Fatalf("connection closed for good after %d attempts, last error %v", n, err)
		}
		if n < 3 || err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
			return fmt.Errorf("%d attempts, last error %v", n, err)
		}
		return nil
	})
	s.Shutdown()
	s.WaitForShutdown()

	run(pub)
	waitFor(t, 5*time.Second, "reconnected", func() error {
		if s := k.Snapshot(); s.Stale() || !s.Connected() {
			return fmt.Errorf("stale=%v connected=%v", s.Stale(), s.Connected())
		}
		return nil
	})
	if err := k.Publish(ctxT(t), Nodes, "n1", []byte("back")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "entry after reconnect", hasValue(k, Nodes, "n1", "back"))
}

// TestAuthCreds: a server in operator mode (a trusted operator, a memory
// account resolver holding the system account and an account with
// JetStream) accepts a KV with a creds file of a user of that account.
func TestAuthCreds(t *testing.T) {
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	op, err := nkeys.CreateOperator()
	must(err)
	opPub, err := op.PublicKey()
	must(err)
	opClaims := jwt.NewOperatorClaims(opPub)
	opClaims.Name = "test-operator"
	opJWT, err := opClaims.Encode(op)
	must(err)
	trusted, err := jwt.DecodeOperatorClaims(opJWT)
	must(err)

	// account returns a new account with the JWT signed by the operator.
	account := func(name string, withJetStream bool) (nkeys.KeyPair, string, string) {
		kp, err := nkeys.CreateAccount()
		must(err)
		pub, err := kp.PublicKey()
		must(err)
		ac := jwt.NewAccountClaims(pub)
		ac.Name = name
		if withJetStream {
			ac.Limits.JetStreamLimits = jwt.JetStreamLimits{
				MemoryStorage: jwt.NoLimit, DiskStorage: jwt.NoLimit, Streams: jwt.NoLimit, Consumer: jwt.NoLimit,
			}
		}
		token, err := ac.Encode(op)
		must(err)
		return kp, pub, token
	}
	// creds writes a creds file for a new user of account kp.
	creds := func(kp nkeys.KeyPair) string {
		u, err := nkeys.CreateUser()
		must(err)
		upub, err := u.PublicKey()
		must(err)
		useed, err := u.Seed()
		must(err)
		uc := jwt.NewUserClaims(upub)
		uc.Name = "spangle"
		token, err := uc.Encode(kp)
		must(err)
		b, err := jwt.FormatUserConfig(token, useed)
		must(err)
		return writeFile(t, t.TempDir(), "user.creds", b)
	}

	_, sysPub, sysJWT := account("SYS", false)
	accKp, accPub, accJWT := account("APP", true)
	resolver := &server.MemAccResolver{}
	must(resolver.Store(sysPub, sysJWT))
	must(resolver.Store(accPub, accJWT))
	s := natstest.RunServer(t, &server.Options{
		TrustedOperators: []*jwt.OperatorClaims{trusted},
		SystemAccount:    sysPub,
		AccountResolver:  resolver,
	})

	c := testConfig(t, s.ClientURL())
	c.CredsFile = creds(accKp)
	t.Run("creds file", func(t *testing.T) {
		checkWorks(t, c)
		// The buckets live in the account of the creds.
		acc, err := s.LookupAccount(accPub)
		must(err)
		if n := acc.JetStreamUsage().Streams; n != numBuckets {
			t.Errorf("account has %d streams, want %d", n, numBuckets)
		}
	})

	t.Run("creds of an unknown account", func(t *testing.T) {
		strangerKp, _, _ := account("STRANGER", true) // not in the resolver
		c := c
		c.CredsFile = creds(strangerKp)
		wantErr(t, startFails(t, c), "authorization violation")
	})
	t.Run("missing creds file", func(t *testing.T) {
		// Read when connecting: Start fails at once.
		c := c
		c.CredsFile = filepath.Join(t.TempDir(), "missing.creds")
		k := newKV(t, c)
		err := k.Start(ctxT(t))
		if err == nil {
			t.Fatal("Start succeeded")
		}
		wantErr(t, err, "missing.creds: no such file")
	})
}

// TestAuthConfigValidate covers the security options' validation cases not
// in TestConfigValidate.
func TestAuthConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
	}{
		{"key without cert", func(c *Config) { c.URLs = []string{"tls://h"}; c.TLSKeyFile = "k" }},
		{"nkey on embedded", func(c *Config) { c.NKeySeedFile = "s" }},
		{"lookups nkey on embedded", func(c *Config) { c.LookupNKeySeedFile = "s" }},
		{"lookups creds on embedded", func(c *Config) { c.LookupCredsFile = "s" }},
		{"lookups creds and nkey", func(c *Config) {
			c.URLs = []string{"nats://h"}
			c.LookupCredsFile, c.LookupNKeySeedFile = "a", "b"
		}},
		{"CA on embedded", func(c *Config) { c.TLSCAFile = "ca" }},
		{"client cert on embedded", func(c *Config) { c.TLSCertFile, c.TLSKeyFile = "c", "k" }},
		{"skip verify on embedded", func(c *Config) { c.TLSInsecureSkipVerify = true }},
		{"operator on a region's server", func(c *Config) {
			c.Region.Name, c.Region.Hub = "ra", "nats-leaf://127.0.0.1:7422"
			c.EmbeddedUsers = []User{{Name: "ops", Password: "pw", Role: RoleOperator}}
		}},
		{"publisher on a region's server", func(c *Config) {
			c.Region.Name, c.Region.Hub = "ra", "nats-leaf://127.0.0.1:7422"
			c.EmbeddedUsers = []User{{Name: "etl", Password: "pw", Role: RolePublisher, Buckets: []string{"data"}}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			c.EmbeddedStoreDir = "nats"
			tt.change(&c)
			if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("Validate() = %v, want ErrInvalidConfig", err)
			}
			if _, err := New(c); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("New() = %v, want ErrInvalidConfig", err)
			}
		})
	}
}
