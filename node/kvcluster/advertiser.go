package kvcluster

import (
	"context"
	"fmt"

	"github.com/spangledb/spangle/kvwatch"
	"github.com/spangledb/spangle/node"
)

// Advertiser stores a node's entries (node.Advertiser) in the cluster's
// KV buckets through a kvwatch.KV: node and partitions entries as the KV's
// own TTL'd entries (Publish, Withdraw: kept alive by its heartbeat), the
// versions entry as a permanent Put. It lives in edge because the entries
// are what clients route on (the part subjects, edge/client). Safe for
// concurrent use.
type Advertiser struct {
	kv *kvwatch.KV
}

// NewAdvertiser returns an advertiser writing through kv. Writes fail
// with kvwatch.ErrNotStarted until kv has started; the node retries them.
func NewAdvertiser(kv *kvwatch.KV) *Advertiser { return &Advertiser{kv: kv} }

// Publish implements node.Advertiser.
func (a *Advertiser) Publish(ctx context.Context, kind node.AdvertKind, key string, value []byte) error {
	switch kind {
	case node.AdvertNode:
		return a.kv.Publish(ctx, kvwatch.Nodes, key, value)
	case node.AdvertPartitions:
		return a.kv.Publish(ctx, kvwatch.Partitions, key, value)
	case node.AdvertVersion:
		if a.kv.Region().Enabled() {
			return nil // the versions bucket is the hub's mirror: the hub's alone to write
		}
		_, err := a.kv.Put(ctx, kvwatch.Versions, key, value)
		return err
	}
	return fmt.Errorf("edge: advertise: unknown kind %v", kind)
}

// Withdraw implements node.Advertiser.
func (a *Advertiser) Withdraw(ctx context.Context, kind node.AdvertKind, key string) error {
	switch kind {
	case node.AdvertNode:
		return a.kv.Withdraw(ctx, kvwatch.Nodes, key)
	case node.AdvertPartitions:
		return a.kv.Withdraw(ctx, kvwatch.Partitions, key)
	case node.AdvertVersion:
		if a.kv.Region().Enabled() {
			return nil
		}
		return a.kv.Delete(ctx, kvwatch.Versions, key)
	}
	return fmt.Errorf("edge: advertise: unknown kind %v", kind)
}

var _ node.Advertiser = (*Advertiser)(nil)
