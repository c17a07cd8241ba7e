package region

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/kvwatch/names"
	"github.com/spangledb/spangle/kvwatch/natsconn"
)

// RegionsBucket returns the configuration of the hub's bucket of
// regions of cluster: one entry per region, each written with its own
// time to live (Announce), so that a region gone quiet drops out.
func RegionsBucket(cluster string) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:         names.KVBucket(cluster, names.Regions),
		Description:    "spangle regions of cluster " + cluster + ": one entry per region, kept by its nodes",
		History:        1,
		Replicas:       1,
		Storage:        jetstream.FileStorage,
		LimitMarkerTTL: time.Minute,
	}
}

// Announce writes region c.Name's entry in the hub's bucket of regions of
// cluster, through the region's server (nc) and the leafnode, with a time
// to live of ttl (whole seconds, at least 1 s): the region's nodes call
// it every HubCheckInterval, so the hub lists the regions alive within
// ttl (spangle status --regions). It creates the bucket if the hub has
// none (RegionsBucket). Every node of a region writes the same entry;
// the last write wins, which is all a list of regions needs. It blocks
// until ctx ends at most.
func Announce(ctx context.Context, nc *nats.Conn, c Config, cluster string, ttl time.Duration) error {
	hub, err := natsconn.JetStream(nc, natsconn.Options{Domain: c.HubDomain})
	if err != nil {
		return err
	}
	want := RegionsBucket(cluster)
	if _, err := hub.Stream(ctx, names.KVStream(want.Bucket)); errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = hub.CreateKeyValue(ctx, want)
		if err != nil && !errors.Is(err, jetstream.ErrBucketExists) && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return fmt.Errorf("region: create the hub's bucket %s: %w", want.Bucket, err)
		}
	} else if err != nil {
		return fmt.Errorf("region: the hub's bucket %s: %w", want.Bucket, err)
	}
	// A put through the hub's API prefix, which the hub maps to its own
	// $KV subject: the leafnode carries it (its deny lists stop $KV.>
	// only), and the hub's permissions for this region allow this key
	// alone (HubLeafPublish).
	subject := names.APIPrefix(c.HubDomain) + "." + names.KVSubject(want.Bucket, names.RegionKey(c.Name))
	if _, err := hub.Publish(ctx, subject, []byte(c.Name), jetstream.WithMsgTTL(ttl.Truncate(time.Second))); err != nil {
		return fmt.Errorf("region: announce %s at the hub: %w", c.Name, err)
	}
	return nil
}

// Regions returns the regions whose entries the bucket of regions of
// cluster holds, through js (the hub's JetStream): those that announced
// themselves within their time to live. A hub without the bucket has
// none.
func Regions(ctx context.Context, js jetstream.JetStream, cluster string) ([]string, error) {
	entries, err := LastEntries(ctx, js, names.KVBucket(cluster, names.Regions), ">")
	if err != nil {
		return nil, err
	}
	var out []string
	for k := range entries {
		if names.Valid(k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out, nil
}

// maxEntries bounds the keys LastEntries reads (one batch of
// multi_last, which nats-server answers up to 1024 subjects).
const maxEntries = 1024

// LastEntries returns the live entries (key → value) of the keys of
// bucket matching filter ("*.pin.*", ">"), at most maxEntries, through
// js's connection. It reads them with one batched direct get
// (multi_last), never a consumer: an operator's account at a hub with
// accounts imports those under their own name ("$JS.API.DIRECT.GET…",
// used when js speaks the imported API prefix) and no consumer creation.
// A bucket that does not exist has none.
func LastEntries(ctx context.Context, js jetstream.JetStream, bucket, filter string) (map[string][]byte, error) {
	api := strings.TrimSuffix(js.Options().APIPrefix, ".")
	if api == "" || api == names.ImportedAPI {
		api = names.APIPrefix("")
	}
	subject := api + ".DIRECT.GET." + names.KVStream(bucket)
	nc := js.Conn()
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe() //nolint:errcheck // the connection may be closed
	pre := names.KVSubject(bucket, "")
	body := fmt.Appendf(nil, `{"multi_last":[%q],"batch":%d}`, pre+filter, maxEntries)
	if err := nc.PublishRequest(subject, inbox, body); err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return nil, fmt.Errorf("region: bucket %s: %w", bucket, err)
		}
		switch status := m.Header.Get("Status"); status {
		case "":
		case "204", "404": // the end, or no entry
			return out, nil
		case "503": // no such stream answers: no bucket
			return out, nil
		default:
			return nil, fmt.Errorf("region: bucket %s: status %s %s", bucket, status, m.Header.Get("Description"))
		}
		op := m.Header.Get("KV-Operation")
		if k, ok := strings.CutPrefix(m.Header.Get("Nats-Subject"), pre); ok && k != "" {
			if op == "DEL" || op == "PURGE" || m.Header.Get("Nats-Marker-Reason") != "" {
				delete(out, k)
			} else if len(out) < maxEntries {
				out[k] = m.Data
			}
		}
	}
}
