package kvwatch

import (
	"fmt"
	"github.com/spangledb/spangle/kvwatch/names"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestCluster runs three KVs, each with its own embedded server, forming
// one NATS cluster with R3 buckets. Entries work; with one server killed
// (no clean Shutdown of its KV) the others keep reading, get writes through
// again after the stream leaders move, and see the dead node's entry
// expire.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("three-server cluster")
	}
	kvs := startAll(t, clusterConfigs(t, 3))
	ctx := ctxT(t)
	for i, k := range kvs {
		node := "n" + strconv.Itoa(i+1)
		// The R3 streams may still be electing their leaders on a loaded
		// machine: "no response from stream" until they have.
		waitFor(t, 15*time.Second, node+" published", func() error {
			return k.Publish(ctx, Nodes, node, []byte(node))
		})
	}
	for _, k := range kvs {
		waitFor(t, 5*time.Second, "three nodes seen", func() error {
			if n := k.Snapshot().Len(Nodes); n != 3 {
				return fmt.Errorf("%d nodes: %v", n, k.Snapshot().Keys(Nodes))
			}
			return nil
		})
	}

	// Kill the third server. Its KV keeps its heartbeat, which now fails.
	dead := kvs[2].emb.srv.Load()
	dead.Shutdown()
	dead.WaitForShutdown()
	a, b := kvs[0], kvs[1]
	if err := hasValue(a, Nodes, "n3", "n3")(); err != nil {
		t.Fatalf("read right after losing a server: %v", err)
	}
	waitFor(t, 15*time.Second, "writes work again", func() error {
		return a.Publish(ctx, Partitions, names.PartitionKey("db", "v1", "n1"), []byte("0,1"))
	})
	waitFor(t, 10*time.Second, "the other node sees the write", hasValue(b, Partitions, "db.v1.n1", "0,1"))
	waitFor(t, 10*time.Second, "dead node's entry expired", hasNoKey(b, Nodes, "n3"))
	for _, k := range []*KV{a, b} {
		waitFor(t, 10*time.Second, "survivors still there", func() error {
			if n := k.Snapshot().Len(Nodes); n != 2 {
				return fmt.Errorf("%d nodes: %v", n, k.Snapshot().Keys(Nodes))
			}
			return nil
		})
	}

	// Shut the survivors down together, while they still have a quorum to
	// delete their entries.
	var wg sync.WaitGroup
	for _, k := range []*KV{a, b} {
		wg.Go(func() {
			if err := k.Shutdown(ctxT(t)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}
