package region

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/kvwatch/names"
)

// Consumers the hub keeps for its regions (Config.HubConsumers). A mirror
// left to itself asks the hub for a consumer of its own making
// (CONSUMER.CREATE, with a deliver subject in the request body), which
// is why a region's leafnode login once needed CONSUMER.CREATE and
// DELETE on every stream of the hub and shared "$JS.M.>" and "$JSC.R.>"
// with every other region: one region could delete another's consumer,
// or create one delivering a hub stream onto any subject of the hub's
// account. With hub consumers the hub makes one durable push consumer
// per region and stream (EnsureHubConsumers, run by the hub's
// administrator: spangle region-consumers), whose deliver subject names
// the region (DeliverSubject), and the region's mirror only resets it
// (nats-server's durable sourcing, "$JS.API.CONSUMER.RESET.<stream>.<name>",
// nats-server 2.14 and later): a subject that names the region's own
// consumer, so that the hub's account for the region (HubAccounts)
// imports exactly that, the flow control of that consumer, and the
// region's own deliveries.

// ConsumerName is the durable consumer the hub keeps for region on each
// stream the region mirrors.
func ConsumerName(region string) string { return "spangle_region_" + region }

// DeliverSubject is where the hub's consumer for region of stream
// delivers: a subject of the hub's account that only region's account
// imports (HubAccounts). It is not under "spangle." nor "$KV.", which
// the leafnode link denies (Deny).
func DeliverSubject(region, stream string) string {
	return "spangle_mirror." + region + "." + stream
}

// HubConsumer returns the configuration of the hub's consumer for region
// of stream: durable, push, to DeliverSubject, acknowledged by flow
// control (what nats-server's durable sourcing requires; it sets the
// flow control and the 1 s heartbeat), from the stream's first message.
func HubConsumer(region, stream string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:        ConsumerName(region),
		Description:    "spangle: the mirror of " + stream + " in region " + region,
		DeliverSubject: DeliverSubject(region, stream),
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		AckPolicy:      jetstream.AckFlowControlPolicy,
	}
}

// MirroredStreams are the hub's streams a region of cluster mirrors: the
// versions bucket's, then each Object Store bucket's.
func MirroredStreams(cluster string, buckets []string) []string {
	out := []string{names.KVStream(names.KVBucket(cluster, names.Versions))}
	for _, b := range buckets {
		out = append(out, names.ObjectStream(b))
	}
	return out
}

// ErrNoStream is wrapped when the hub has no stream to make a consumer
// on: publish once (the versions and Object Store buckets are created by
// the first spangle publish) before making the regions' consumers.
var ErrNoStream = errors.New("region: the hub has no such stream yet")

// EnsureHubConsumers makes, at the hub (js: a login of the hub's cluster
// account, in the hub's own domain), the consumers of region on each of
// streams (MirroredStreams), or checks those there. A consumer there with
// another deliver subject or acknowledgement is an error naming it (it
// would deliver elsewhere): delete it and run again. Idempotent; it
// returns the consumers it created.
func EnsureHubConsumers(ctx context.Context, js jetstream.JetStream, region string, streams []string) (created []string, err error) {
	if !validDomain(region) {
		return nil, fmt.Errorf("%w: region %q is not a valid JetStream domain", ErrInvalidConfig, region)
	}
	for _, st := range streams {
		want := HubConsumer(region, st)
		s, err := js.Stream(ctx, st)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return created, fmt.Errorf("%w: %s", ErrNoStream, st)
		}
		if err != nil {
			return created, fmt.Errorf("region: stream %s: %w", st, err)
		}
		c, err := s.PushConsumer(ctx, want.Durable)
		if err == nil {
			got := c.CachedInfo().Config
			if got.DeliverSubject != want.DeliverSubject || got.AckPolicy != want.AckPolicy {
				return created, fmt.Errorf("region: consumer %s of %s delivers to %q (ack %s), not %q (ack %s): delete it and run again",
					want.Durable, st, got.DeliverSubject, got.AckPolicy, want.DeliverSubject, want.AckPolicy)
			}
			continue
		}
		if !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return created, fmt.Errorf("region: consumer %s of %s: %w", want.Durable, st, err)
		}
		if _, err := js.CreatePushConsumer(ctx, st, want); err != nil {
			return created, fmt.Errorf("region: create consumer %s of %s: %w", want.Durable, st, err)
		}
		created = append(created, st+"/"+want.Durable)
	}
	return created, nil
}

// EnsureRegionsBucket creates the hub's bucket of regions of cluster
// (RegionsBucket) through js (the hub's cluster account), if missing: with
// the hub's region accounts a region may bind it and write its own entry
// (Announce), not create it.
func EnsureRegionsBucket(ctx context.Context, js jetstream.JetStream, cluster string) error {
	want := RegionsBucket(cluster)
	if _, err := js.KeyValue(ctx, want.Bucket); err == nil {
		return nil
	} else if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return fmt.Errorf("region: bucket %s: %w", want.Bucket, err)
	}
	_, err := js.CreateKeyValue(ctx, want)
	if err != nil && !errors.Is(err, jetstream.ErrBucketExists) {
		return fmt.Errorf("region: create bucket %s: %w", want.Bucket, err)
	}
	return nil
}

// resetSource, for a mirror about to be made whose source is a consumer
// the hub keeps (src.Consumer), asks the hub through js's connection (the
// region's server and the leafnode) to deliver that consumer from the
// stream's first message again: a mirror made anew (a region that lost
// its store, or a bucket deleted in the region) would otherwise resume
// where the last one was acknowledged by flow control, and miss every
// entry and object before (TestHubAccountsRegionWiped). Nothing to do
// for a mirror that makes its own consumers. A mirror already running
// that meets a reset gets what it has again and skips it.
func resetSource(ctx context.Context, js jetstream.JetStream, src *jetstream.StreamSource) error {
	if src == nil || src.Consumer == nil || src.External == nil {
		return nil
	}
	subject := src.External.APIPrefix + ".CONSUMER.RESET." + src.Name + "." + src.Consumer.Name
	m, err := js.Conn().RequestWithContext(ctx, subject, []byte(`{"seq":1}`))
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
			return fmt.Errorf("%w: the hub did not answer the reset of its consumer %s of %s, which the region's new mirror needs first (is the leafnode up, and has spangle region-consumers made it?): %v",
				ErrHub, src.Consumer.Name, src.Name, err)
		}
		return fmt.Errorf("region: reset the hub's consumer %s of %s: %w", src.Consumer.Name, src.Name, err)
	}
	var r struct {
		Error *struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return fmt.Errorf("region: reset the hub's consumer %s of %s: %w", src.Consumer.Name, src.Name, err)
	}
	if r.Error != nil {
		return fmt.Errorf("%w: reset the hub's consumer %s of %s: %d %s", ErrHub, src.Consumer.Name, src.Name, r.Error.Code, r.Error.Description)
	}
	return nil
}
