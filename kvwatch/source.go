package kvwatch

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"
)

// SourceJetStream returns the JetStream an Object Store source of bucket
// reads through: this KV's handle, once Ready. In a region it is returned
// only once the region's mirror of the hub's bucket exists
// (region.EnsureObjectMirror with Config.Replicas, idempotent across the
// region's nodes; created by the first call that finds it missing), so
// that the source reads the mirror, in the region, under the bucket's own
// name. With the versions bucket's mirror (bindBucket), this is all of a
// region's mirrors, in one package.
//
// The function blocks until the KV is ready or ctx ends, and is safe for
// concurrent use; after Shutdown it fails.
func (k *KV) SourceJetStream(bucket string) func(context.Context) (jetstream.JetStream, error) {
	var mirrored atomic.Bool
	return func(ctx context.Context) (jetstream.JetStream, error) {
		select {
		case <-k.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		js := k.JetStream()
		if js == nil {
			return nil, errors.New("kvwatch: NATS connection closed")
		}
		if !k.cfg.Region.Enabled() || mirrored.Load() {
			return js, nil
		}
		if err := k.cfg.Region.EnsureObjectMirror(ctx, js, bucket, k.cfg.Replicas); err != nil {
			return nil, err
		}
		mirrored.Store(true)
		return js, nil
	}
}
