package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"net/http"
	"os"
)

// tlsFlags are the HTTPS flags of every command that speaks HTTP (get,
// list, status, ready): whom to trust besides, or instead of, the
// system's CAs. Without them Go reads the system's CAs, which
// SSL_CERT_FILE and SSL_CERT_DIR replace.
type tlsFlags struct {
	cacert   string
	insecure bool
}

func addTLSFlags(fs *flag.FlagSet) *tlsFlags {
	t := &tlsFlags{}
	fs.StringVar(&t.cacert, "cacert", "", "https: trust the certificates of this PEM file (the node's CA, or its own self-signed certificate) instead of the system's")
	fs.BoolVar(&t.insecure, "insecure", false, "https: do not verify the node's certificate (a probe of a node on this host, whose certificate names another)")
	return t
}

// transport returns the HTTP transport the flags ask for, or nil for
// the default (the system's CAs).
func (t *tlsFlags) transport() (*http.Transport, error) {
	if t.cacert == "" && !t.insecure {
		return nil, nil
	}
	if t.cacert != "" && t.insecure {
		return nil, usagef("--cacert and --insecure are exclusive")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.insecure {
		cfg.InsecureSkipVerify = true // asked for
	} else {
		pem, err := os.ReadFile(t.cacert)
		if err != nil {
			return nil, fmt.Errorf("--cacert: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--cacert %s: no PEM certificate in it", t.cacert)
		}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg
	return tr, nil
}

// client returns an HTTP client with the transport the flags ask for.
func (t *tlsFlags) client() (*http.Client, error) {
	tr, err := t.transport()
	if err != nil || tr == nil {
		return http.DefaultClient, err
	}
	return &http.Client{Transport: tr}, nil
}
