package region

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/kvwatch/natsconn"
)

// CheckDomain checks that the JetStream nc reaches is the region's own:
// its domain is name. A region whose server has another domain (or none)
// would keep its buckets where another region, or the hub, reaches them
// under a name that is not the region's.
func CheckDomain(ctx context.Context, nc *nats.Conn, name string) error {
	js, err := natsconn.JetStream(nc, natsconn.Options{})
	if err != nil {
		return err
	}
	info, err := js.AccountInfo(ctx)
	if err != nil {
		return fmt.Errorf("region: JetStream of the region's NATS server: %w", err)
	}
	if info.Domain != name {
		return fmt.Errorf("%w: region.name is %q but the region's NATS server has JetStream domain %q (its config needs jetstream { domain: %s })",
			ErrInvalidConfig, name, info.Domain, name)
	}
	return nil
}

// CheckHub asks the hub's JetStream for its account information through
// the region's server (nc), across the leafnode: nil when it answers.
// Otherwise the error, wrapping ErrHub, says what to check; leafs, when
// not nil, is how many leafnode connections the region's (embedded)
// server has, to tell a link that is down from a hub without JetStream.
// A failed check changes nothing: the region serves what its mirrors
// hold, and the mirrors fill when the hub answers.
func CheckHub(ctx context.Context, nc *nats.Conn, c Config, leafs func() int) error {
	js, err := natsconn.JetStream(nc, natsconn.Options{Domain: c.HubDomain})
	if err != nil {
		return err
	}
	_, err = js.AccountInfo(ctx)
	if err == nil {
		return nil
	}
	if leafs != nil && leafs() == 0 {
		return fmt.Errorf("%w: the leafnode link to the hub at %q is not up (check region.hub, region.hub_creds and region.hub_tls_ca; the NATS server's log says why): %v",
			ErrHub, redacted(c.Hub), err)
	}
	if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		return fmt.Errorf("%w: no JetStream answers in domain %q (region.hub_domain) through the leafnode: the hub needs jetstream { domain: %s }, and the link must carry $JS.%s.API: %v",
			ErrHub, c.HubDomain, c.HubDomain, c.HubDomain, err)
	}
	return fmt.Errorf("%w: JetStream of domain %q (region.hub_domain): %v", ErrHub, c.HubDomain, err)
}

// redacted returns the hub's URLs with their passwords replaced, for
// messages.
func redacted(hubs string) string {
	out := strings.Split(hubs, ",")
	for i, h := range out {
		if u, err := url.Parse(strings.TrimSpace(h)); err == nil {
			out[i] = u.Redacted()
		}
	}
	return strings.Join(out, ",")
}
