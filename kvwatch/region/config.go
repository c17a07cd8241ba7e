package region

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Config places a node in a region. It maps one to one onto the [region]
// table of the configuration file. The zero Name means no regions: the
// node is the stand-alone cluster it always was, and nothing else of
// Config applies.
type Config struct {
	// Name is the region of this node, and the JetStream domain of the
	// region's NATS server (the embedded one, or the one at [nats] url).
	// It must be a valid name (^[-_a-zA-Z0-9]+$, at most 64 bytes) other
	// than HubDomain. Default "": no regions.
	Name string

	// Hub is the leafnode URL of the hub (nats-leaf://host:7422, or
	// tls://… for TLS) that the embedded NATS server joins as a leafnode.
	// Only for the embedded server: a region with its own NATS server
	// configures its leafnode remote there. Default "": none (then the
	// embedded server is alone and the mirrors wait for a hub that never
	// comes; Validate refuses a region with an embedded server and no
	// Hub).
	Hub string

	// HubDomain is the hub's JetStream domain: where the Object Store
	// bucket, the versions announcements and the pins live. Default "hub".
	HubDomain string

	// HubCreds is a NATS credentials file (JWT and seed) for the leafnode
	// connection to Hub. Default "": none.
	HubCreds string

	// HubTLSCA is a CA bundle to verify the hub's leafnode certificate;
	// set, the leafnode connection uses TLS. Default "": TLS only if Hub's
	// scheme is tls.
	HubTLSCA string

	// HubCheckTimeout bounds the check that the hub's JetStream answers
	// through the leafnode, made at start and every HubCheckInterval
	// (sooner while it fails: 1 s, doubling up to the interval); each
	// check that passes announces the region at the hub (Announce, an
	// entry living three intervals). A failed check is logged as an error
	// (once, until the hub answers again) and the node serves on from
	// the region's mirrors. Defaults 5s and 30s.
	HubCheckTimeout  time.Duration
	HubCheckInterval time.Duration

	// HubConsumers: the region's mirrors use the durable consumers the
	// hub keeps for this region (HubConsumer, made at the hub by
	// spangle region-consumers) instead of creating consumers of their
	// own, so that the region's login at the hub needs no consumer
	// rights there and shares nothing with other regions (HubAccounts,
	// docs/SECURITY.md). A mirror's source cannot change: mirrors made
	// with the other setting must be deleted first. Default false.
	HubConsumers bool
}

// DefaultConfig returns the defaults: no region, hub domain "hub".
func DefaultConfig() Config {
	return Config{HubDomain: "hub", HubCheckTimeout: 5 * time.Second, HubCheckInterval: 30 * time.Second}
}

// Enabled reports whether the node is in a region (Name is set).
func (c Config) Enabled() bool { return c.Name != "" }

// ErrInvalidConfig is wrapped by every error of Validate.
var ErrInvalidConfig = errors.New("region: invalid config")

// maxDomainLen bounds a region or hub domain name.
const maxDomainLen = 64

var domainRe = regexp.MustCompile(`^[-_a-zA-Z0-9]+$`)

// validDomain reports whether s can be a JetStream domain spangle uses:
// one subject token ("$JS.<domain>.API"), one KV key token (a region pin
// "<db>.pin.<region>"), not JetStream's reserved words.
func validDomain(s string) bool {
	return len(s) <= maxDomainLen && domainRe.MatchString(s) && s != "API" && s != "$G" && s != "$SYS"
}

// Validate reports the first problem of c, naming its [region] key, as
// an error wrapping ErrInvalidConfig. embedded tells whether the node
// runs the embedded NATS server. It changes nothing.
func (c Config) Validate(embedded bool) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	if !c.Enabled() {
		if c.Hub != "" || c.HubCreds != "" || c.HubTLSCA != "" {
			return bad("region.hub, hub_creds and hub_tls_ca need region.name")
		}
		return nil
	}
	if !validDomain(c.Name) {
		return bad("region.name %q is not a valid JetStream domain: want ^[-_a-zA-Z0-9]+$, at most %d bytes", c.Name, maxDomainLen)
	}
	if !validDomain(c.HubDomain) {
		return bad("region.hub_domain %q is not a valid JetStream domain: want ^[-_a-zA-Z0-9]+$, at most %d bytes", c.HubDomain, maxDomainLen)
	}
	if c.Name == c.HubDomain {
		return bad("region.name %q is the hub's domain (region.hub_domain): a region needs a domain of its own", c.Name)
	}
	if c.HubCheckTimeout <= 0 || c.HubCheckInterval <= 0 {
		return bad("region.hub_check_timeout %v and hub_check_interval %v: must be positive", c.HubCheckTimeout, c.HubCheckInterval)
	}
	if !embedded {
		if c.Hub != "" || c.HubCreds != "" || c.HubTLSCA != "" {
			return bad("region.hub, hub_creds and hub_tls_ca are for the embedded NATS server; with [nats] url the region's own server is the leafnode (its leafnodes.remotes)")
		}
		return nil
	}
	if c.Hub == "" {
		return bad("region.hub is required with the embedded NATS server: the hub's leafnode URL (nats-leaf://host:7422)")
	}
	for _, h := range strings.Split(c.Hub, ",") {
		if _, err := parseHubURL(h); err != nil {
			return bad("region.hub %q: %v", h, err)
		}
	}
	return nil
}

// parseHubURL parses one leafnode URL of the hub.
func parseHubURL(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "nats-leaf", "nats", "tls", "ws", "wss":
	default:
		return nil, fmt.Errorf("scheme %q: want nats-leaf://host:port (or tls://, ws://, wss://)", u.Scheme)
	}
	if u.Hostname() == "" || u.Port() == "" {
		return nil, errors.New("want host:port")
	}
	return u, nil
}
