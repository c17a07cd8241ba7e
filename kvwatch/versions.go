package kvwatch

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/kvwatch/names"
)

// OpenVersions binds the versions bucket of cfg's cluster through js, for
// a tool that announces a version and goes (spangle publish) without
// being a node: it starts nothing, watches nothing and touches no other
// bucket. An existing bucket is bound as it is, never reconfigured (its
// configuration is the nodes'); a missing one is created with the
// configuration a node would give it (cfg.ClusterName, Replicas,
// MarkerTTL), since a hub of regions has no node to create it. Each
// request is bounded by cfg.OpTimeout. cfg is not validated beyond what
// is used.
func OpenVersions(ctx context.Context, js jetstream.JetStream, cfg Config) (jetstream.KeyValue, error) {
	if !names.Valid(cfg.ClusterName) || cfg.Replicas < 1 || cfg.OpTimeout <= 0 {
		return nil, fmt.Errorf("%w: cluster %q, replicas %d, op timeout %v", ErrInvalidConfig, cfg.ClusterName, cfg.Replicas, cfg.OpTimeout)
	}
	want := cfg.bucketConfig(watched{b: Versions, name: bucketName(cfg.ClusterName, Versions)})
	bind := func() (jetstream.KeyValue, error) {
		ctx, cancel := context.WithTimeout(ctx, cfg.OpTimeout)
		defer cancel()
		return js.KeyValue(ctx, want.Bucket)
	}
	kv, err := bind()
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		cctx, cancel := context.WithTimeout(ctx, cfg.OpTimeout)
		kv, err = js.CreateKeyValue(cctx, want)
		cancel()
		if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			kv, err = bind() // created meanwhile, by a node or another publish
		}
	}
	if err != nil {
		return nil, fmt.Errorf("kvwatch: versions bucket %s: %w", want.Bucket, err)
	}
	return kv, nil
}
