package natsconn

import (
	"crypto/tls"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/kvwatch/names"
)

// Options say how to reach NATS and which JetStream to use. The zero
// value connects anonymously, without TLS, to the account's own
// JetStream, with the clients' default timeouts.
type Options struct {
	// Name is the connection's name as servers show it. Default "": none.
	Name string
	// Timeout bounds connecting to a server. Default 0: the client's (2 s).
	Timeout time.Duration
	// CredsFile is a NATS credentials file (a user JWT and its NKey seed).
	// Default "": none.
	CredsFile string
	// NKeySeedFile is a file holding a user's NKey seed. Default "": none.
	NKeySeedFile string
	// TLSCAFile is a PEM file of the CAs that sign the servers'
	// certificates. Default "": the system's.
	TLSCAFile string
	// TLSCertFile and TLSKeyFile are a client certificate and its key, for
	// servers that verify clients. Default "": none.
	TLSCertFile, TLSKeyFile string
	// TLSInsecureSkipVerify connects over TLS without checking the
	// server's certificate (tests only). Default false.
	TLSInsecureSkipVerify bool

	// Domain is the JetStream domain to use: "" for the account's own
	// JetStream, a name to reach another domain's (API prefix
	// $JS.<domain>.API) across leafnodes. Default "".
	Domain string
	// APITimeout bounds each JetStream API request whose context has no
	// deadline. Default 0: the client's (5 s).
	APITimeout time.Duration
}

// Auth returns the client options of o's credentials and TLS, in the
// order the client applies them. It fails only when the NKey seed file
// cannot be read.
func (o Options) Auth() ([]nats.Option, error) {
	var opts []nats.Option
	if o.TLSInsecureSkipVerify {
		opts = append(opts, nats.Secure(&tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: true})) //nolint:gosec // asked for by the configuration
	}
	if o.TLSCAFile != "" {
		opts = append(opts, nats.RootCAs(o.TLSCAFile))
	}
	if o.TLSCertFile != "" {
		opts = append(opts, nats.ClientCert(o.TLSCertFile, o.TLSKeyFile))
	}
	if o.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(o.CredsFile))
	}
	if o.NKeySeedFile != "" {
		opt, err := nats.NkeyOptionFromSeed(o.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("nkey seed %s: %w", o.NKeySeedFile, err)
		}
		opts = append(opts, opt)
	}
	return opts, nil
}

// Options returns the client options of o: its name, its timeout, then
// Auth's.
func (o Options) Options() ([]nats.Option, error) {
	var opts []nats.Option
	if o.Name != "" {
		opts = append(opts, nats.Name(o.Name))
	}
	if o.Timeout > 0 {
		opts = append(opts, nats.Timeout(o.Timeout))
	}
	auth, err := o.Auth()
	if err != nil {
		return nil, err
	}
	return append(opts, auth...), nil
}

// Connect connects to urls (comma-separated) with o's options followed by
// extra. It blocks until connected or refused, as nats.Connect does.
func Connect(urls string, o Options, extra ...nats.Option) (*nats.Conn, error) {
	opts, err := o.Options()
	if err != nil {
		return nil, err
	}
	return nats.Connect(urls, append(opts, extra...)...)
}

// JetStream returns a JetStream handle on nc for o.Domain, with
// o.APITimeout as the default request timeout. The caller keeps nc.
func JetStream(nc *nats.Conn, o Options) (jetstream.JetStream, error) {
	var opts []jetstream.JetStreamOpt
	if o.APITimeout > 0 {
		opts = append(opts, jetstream.WithDefaultTimeout(o.APITimeout))
	}
	if o.Domain != "" {
		return jetstream.NewWithDomain(nc, o.Domain, opts...)
	}
	return jetstream.New(nc, opts...)
}

// ToolJetStream is JetStream for a command-line tool (publish, activate,
// rollback, status) on nc: where nc's account imports the cluster's API
// (a publisher's or an operator's account, names.ImportedAPI; see
// docs/SECURITY.md), through that prefix, else as JetStream does. It asks
// the imported API's account information once to tell, bounded by
// o.APITimeout (1 s when unset).
func ToolJetStream(nc *nats.Conn, o Options) (jetstream.JetStream, error) {
	if o.Domain == "" {
		wait := o.APITimeout
		if wait <= 0 {
			wait = time.Second
		}
		if _, err := nc.Request(names.ImportedAPI+".INFO", nil, wait); err == nil {
			var opts []jetstream.JetStreamOpt
			if o.APITimeout > 0 {
				opts = append(opts, jetstream.WithDefaultTimeout(o.APITimeout))
			}
			return jetstream.NewWithAPIPrefix(nc, names.ImportedAPI, opts...)
		}
	}
	return JetStream(nc, o)
}
