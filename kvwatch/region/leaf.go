package region

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/spangledb/spangle/kvwatch/names"
)

// Deny lists the subjects a region's leafnode link never carries, in
// either direction (leafnode deny_imports and deny_exports):
//
//   - "spangle.>", the NATS front door's subjects: a lookup made in a
//     region is answered in that region or not at all, never by another
//     region's nodes through the hub;
//   - "$KV.>", the KV buckets' subjects: every region has buckets of the
//     same names in its own domain (nodes, partitions), and a write in
//     one region must not be captured by another's stream. What crosses
//     the link is JetStream's API ("$JS.<domain>.API.>") and the mirrors'
//     deliveries only.
//
// A region with its own NATS server puts the same lists in its leafnode
// remote (examples/regions).
var Deny = []string{"spangle.>", "$KV.>"}

// Remote returns the leafnode remote that makes the embedded server of a
// region a leafnode of the hub: c.Hub's URLs (comma-separated), the
// credentials and TLS CA, and Deny both ways. It reads the CA file. c
// must be valid and Enabled with a Hub.
func Remote(c Config) (*server.RemoteLeafOpts, error) {
	r := &server.RemoteLeafOpts{
		Credentials: c.HubCreds,
		DenyImports: append([]string(nil), Deny...),
		DenyExports: append([]string(nil), Deny...),
	}
	for _, h := range strings.Split(c.Hub, ",") {
		u, err := parseHubURL(h)
		if err != nil {
			return nil, fmt.Errorf("%w: region.hub %q: %v", ErrInvalidConfig, h, err)
		}
		r.URLs = append(r.URLs, u)
		if u.Scheme == "tls" || u.Scheme == "wss" {
			r.TLS = true
		}
	}
	if c.HubCreds != "" {
		if _, err := os.Stat(c.HubCreds); err != nil {
			return nil, fmt.Errorf("region.hub_creds: %w", err)
		}
	}
	if c.HubTLSCA != "" {
		pem, err := os.ReadFile(c.HubTLSCA)
		if err != nil {
			return nil, fmt.Errorf("region.hub_tls_ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("region.hub_tls_ca %s: no PEM certificate", c.HubTLSCA)
		}
		r.TLS = true
		r.TLSConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return r, nil
}

// HubLeafPublish and HubLeafSubscribe are the lists of a hub whose
// logins share one account, which cannot hold a region to them (a reply
// subject of its choosing is published to from inside the server, and
// the mirrors' subjects are shared: docs/SECURITY.md): a hub with
// accounts (kvwatch.HubAccountsConfig, [region] hub_consumers) puts each
// region in an account of its own instead.
//
// HubLeafPublish is what region may send into the hub, as the publish
// allow-list of its leafnode user at the hub (leafnodes { authorization
// { users: [ { user: <region>, permissions: { publish: { allow: [...] } } } ] } }):
// its mirrors' requests to the hub's JetStream (consumers, stream info,
// direct gets) in domain hubDomain, flow-control answers, replies, and
// its own entry in the hub's regions bucket of cluster (Announce:
// creating the bucket, writing the entry through the hub's API prefix).
// Nothing else crosses from the region: not another region's JetStream
// API ("$JS.<other>.API"), not the hub's other API calls (create,
// delete, purge, a write through a mirror), not another region's entry,
// not a KV subject, not a lookup.
func HubLeafPublish(hubDomain, cluster, region string) []string {
	api := names.APIPrefix(hubDomain)
	regions := names.KVBucket(cluster, names.Regions)
	return []string{
		api + ".INFO",
		api + ".STREAM.INFO.>",
		api + ".CONSUMER.CREATE.>",
		api + ".CONSUMER.DELETE.>",
		api + ".CONSUMER.INFO.>",
		api + ".DIRECT.GET.>",
		api + ".STREAM.CREATE." + names.KVStream(regions),
		api + "." + names.KVSubject(regions, names.RegionKey(region)),
		"$JS.FC.>",
		"_INBOX.>",
	}
}

// HubLeafSubscribe is what the hub may send into region, as the
// subscribe allow-list of its leafnode user at the hub (beside
// HubLeafPublish): requests to the region's own JetStream
// ("$JS.<region>.API.>": the hub's operator reading the region), the
// flow-control answers to the consumers those reads create, the
// deliveries of the region's mirrors' consumers at the hub ("$JS.M.>")
// and the answers to their creation ("$JSC.R.>"), and the replies to its
// nodes' requests (under InboxPrefix(region)). Without it a region could
// listen for the requests meant for another region ("$JS.<other>.API.>")
// and answer them in its place, or read the replies to the hub's other
// clients and to other regions' nodes. The server-made subjects ($JS.M,
// $JSC.R) carry no region and stay shared (docs/SECURITY.md).
func HubLeafSubscribe(region string) []string {
	return []string{names.APIPrefix(region) + ".>", "$JS.FC.>", "$JS.M.>", "$JSC.R.>", InboxPrefix(region) + ".>"}
}

// InboxPrefix is the inbox prefix of the NATS connections of region's
// nodes ("_INBOX.<region>"; kvwatch sets it): the hub sends a region only
// the replies under its own prefix (HubLeafSubscribe), so regions do not
// share the hub's "_INBOX.>".
func InboxPrefix(region string) string { return "_INBOX." + region }
