package kvwatch

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/spangledb/spangle/kvwatch/names"
)

// BenchmarkHeartbeatRound: one heartbeat round that refreshes every own
// entry (as after a reconnect) of a node with one node entry and 50
// partitions entries, on an embedded server.
func BenchmarkHeartbeatRound(b *testing.B) {
	c := testConfig(b)
	c.EntryTTL, c.Heartbeat = time.Minute, 50*time.Second // the background heartbeat stays out of the way
	k := startKV(b, c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := k.Publish(ctx, Nodes, "n1", []byte("n1")); err != nil {
		b.Fatal(err)
	}
	for i := range 50 {
		if err := k.Publish(ctx, Partitions, names.PartitionKey("db", fmt.Sprint("v", i), "n1"), []byte("0,1")); err != nil {
			b.Fatal(err)
		}
	}
	failed := testutil.ToFloat64(k.met.heartbeatFailures)
	for b.Loop() {
		k.own.refresh(ctx, true)
	}
	if n := testutil.ToFloat64(k.met.heartbeatFailures) - failed; n != 0 {
		b.Fatalf("%v refreshes failed", n)
	}
}
