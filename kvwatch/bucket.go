package kvwatch

import (
	"context"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/kvwatch/names"
)

// Bucket names one of the cluster's KV buckets.
type Bucket uint8

const (
	// Nodes holds one TTL'd entry per live node, key NodeKey(nodeID).
	Nodes Bucket = iota
	// Partitions holds one TTL'd entry per node and version it serves, key
	// PartitionKey(db, version, nodeID).
	Partitions
	// Versions holds one permanent entry per db, key VersionKey(db): the
	// newest published version.
	Versions

	numBuckets = 3
)

// allBuckets lists every bucket, in order.
var allBuckets = [numBuckets]Bucket{Nodes, Partitions, Versions}

// String returns the bucket's kind as it appears in its name:
// names.Nodes, names.Partitions or names.Versions.
func (b Bucket) String() string {
	if b.valid() {
		return names.Kinds[b]
	}
	return "Bucket(" + strconv.Itoa(int(b)) + ")"
}

// TTL reports whether the bucket holds TTL'd entries, written with Publish.
func (b Bucket) TTL() bool { return b == Nodes || b == Partitions }

func (b Bucket) valid() bool { return b < numBuckets }

// watched is one bucket a KV binds and watches: the kind of entries it
// holds (the snapshot's map it feeds, the writes it takes) and its
// JetStream name.
type watched struct {
	b    Bucket
	name string
}

// watchedBuckets returns the buckets a KV of cluster binds and watches,
// one per kind, in kind order. The watch loop takes them as they come: a
// mirrored or regional bucket is one more element here.
func watchedBuckets(cluster string) []watched {
	ws := make([]watched, 0, numBuckets)
	for _, b := range allBuckets {
		ws = append(ws, watched{b: b, name: bucketName(cluster, b)})
	}
	return ws
}

// bucketName returns the JetStream KV bucket name of b for a cluster.
func bucketName(cluster string, b Bucket) string { return names.KVBucket(cluster, b.String()) }

// A KV bucket's configuration cannot bound its stream's consumers
// (nats.go's KeyValueConfig has no MaxConsumers, and creating or updating
// a bucket sets the stream's to unlimited), so the nodes set it on the
// stream after they create or update a bucket, and on a bucket they find
// without it (created by spangle publish, or before this bound existed).
// JetStream takes the change on an existing stream; consumers beyond a
// lowered limit stay, and no new one is created until they are fewer.

// consumersLimited reports whether st's stream has MaxConsumers as c
// sets it.
func (c Config) consumersLimited(st jetstream.KeyValueStatus) bool {
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	return ok && bs.StreamInfo().Config.MaxConsumers == c.MaxConsumers
}

// limitConsumers sets MaxConsumers on the stream of bucket, unless it
// has it already.
func (c Config) limitConsumers(ctx context.Context, js jetstream.JetStream, bucket string) error {
	stream, err := js.Stream(ctx, names.KVStream(bucket))
	if err != nil {
		return fmt.Errorf("kvwatch: bucket %s: %w", bucket, err)
	}
	cfg := stream.CachedInfo().Config
	if cfg.MaxConsumers == c.MaxConsumers {
		return nil
	}
	cfg.MaxConsumers = c.MaxConsumers
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("kvwatch: bucket %s: set max_consumers %d: %w", bucket, c.MaxConsumers, err)
	}
	return nil
}
