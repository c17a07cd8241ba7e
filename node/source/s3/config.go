package s3

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultEndpoint is AWS S3's global endpoint.
const DefaultEndpoint = "s3.amazonaws.com"

// Config configures a Source ([s3] in spangle.toml). Start from
// DefaultConfig: every field's comment states its default, which
// DefaultConfig holds, and Validate refuses a zero Endpoint, Attempts,
// ListPageSize, ListTimeout or IdleTimeout (the zero value is not usable).
// The fields whose default is zero (Region, the credentials, PathStyle,
// Insecure, Transport) may stay zero.
type Config struct {
	// Endpoint is the S3 server: "host:port", or a URL "http://host:port"
	// or "https://host:port" (the scheme then decides TLS). Default
	// "s3.amazonaws.com" (DefaultEndpoint, AWS).
	Endpoint string
	// Region is the bucket's region. Default "": asked of the server once
	// (GetBucketLocation; us-east-1 when that is denied).
	Region string
	// AccessKeyID, SecretAccessKey and SessionToken are static
	// credentials. Default "": the environment, then the shared AWS files,
	// then IAM (see the package doc).
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	// PathStyle forces path-style requests (http://host/bucket/key), which
	// most self-hosted servers want. Default false: minio-go chooses,
	// virtual-hosted style (http://bucket.host/key) on AWS and GCS, path
	// style elsewhere.
	PathStyle bool
	// Insecure uses plain HTTP for an Endpoint written without a scheme.
	// Default false: HTTPS.
	Insecure bool

	// Attempts is how many times minio-go sends one request before it
	// returns the error (retrying network errors, throttling and 5xx
	// answers, 200 ms to 1 s apart). Default 3; 1 means no retry. Builds
	// retry failed downloads on top of this (node.Config.DownloadRetries).
	Attempts int
	// ListPageSize is the number of keys asked per list request
	// (max-keys). Default 1000, S3's maximum.
	ListPageSize int
	// ListTimeout bounds one listing call of the Source (all its pages and
	// marker reads). Default 1m.
	ListTimeout time.Duration
	// IdleTimeout bounds the wait for a download's response and then for
	// each next bytes of its body: a stalled connection fails the read, and
	// the build resumes the file from where it stopped. Default 1m.
	IdleTimeout time.Duration
	// Transport carries the HTTP requests. Default nil: minio-go's (which
	// honours HTTP_PROXY and SSL_CERT_FILE).
	Transport http.RoundTripper
}

// DefaultConfig returns the defaults, spelled out.
func DefaultConfig() Config {
	return Config{
		Endpoint:     DefaultEndpoint,
		Attempts:     3,
		ListPageSize: 1000,
		ListTimeout:  time.Minute,
		IdleTimeout:  time.Minute,
	}
}

// Validate reports a bad setting, naming its spangle.toml key or, for the
// fields the file does not set, its field. It changes nothing: a field left
// at zero where DefaultConfig has another value is an error (start from
// DefaultConfig).
func (c Config) Validate() error {
	if strings.TrimSpace(c.Endpoint) == "" {
		return fmt.Errorf("%w: s3.endpoint (Endpoint) is empty: want host:port or http(s)://host:port (DefaultConfig has %s)", ErrConfig, DefaultEndpoint)
	}
	if _, _, err := c.endpoint(); err != nil {
		return err
	}
	if (c.AccessKeyID == "") != (c.SecretAccessKey == "") {
		return fmt.Errorf("%w: s3.access_key_id and s3.secret_access_key go together", ErrConfig)
	}
	if c.SessionToken != "" && c.AccessKeyID == "" {
		return fmt.Errorf("%w: a session token needs s3.access_key_id and s3.secret_access_key", ErrConfig)
	}
	if c.Attempts < 1 {
		return fmt.Errorf("%w: Attempts %d: want at least 1 (1: no retry)", ErrConfig, c.Attempts)
	}
	if c.ListPageSize < 1 || c.ListPageSize > 1000 {
		return fmt.Errorf("%w: ListPageSize %d is not within 1..1000", ErrConfig, c.ListPageSize)
	}
	if c.ListTimeout <= 0 {
		return fmt.Errorf("%w: ListTimeout %v: want a positive duration", ErrConfig, c.ListTimeout)
	}
	if c.IdleTimeout <= 0 {
		return fmt.Errorf("%w: IdleTimeout %v: want a positive duration", ErrConfig, c.IdleTimeout)
	}
	return nil
}

// endpoint returns the endpoint's host[:port] and whether it uses TLS.
func (c Config) endpoint() (host string, secure bool, err error) {
	e := strings.TrimSpace(c.Endpoint)
	if !strings.Contains(e, "://") {
		if e == "" || strings.ContainsAny(e, "/?#") {
			return "", false, fmt.Errorf("%w: s3.endpoint %q: want host:port or http(s)://host:port", ErrConfig, c.Endpoint)
		}
		return e, !c.Insecure, nil
	}
	u, err := url.Parse(e)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", false, fmt.Errorf("%w: s3.endpoint %q: want host:port or http(s)://host:port", ErrConfig, c.Endpoint)
	}
	return u.Host, u.Scheme == "https", nil
}
