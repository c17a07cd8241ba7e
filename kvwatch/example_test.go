package kvwatch_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/spangledb/spangle/kvwatch"
	"github.com/spangledb/spangle/kvwatch/names"
)

// A single node with an embedded NATS server advertises itself and waits
// until its own entry shows up in a snapshot.
func ExampleKV() {
	dir, err := os.MkdirTemp("", "kvwatch-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	cfg := kvwatch.DefaultConfig()
	cfg.EmbeddedListen = "127.0.0.1:-1" // a random port
	cfg.EmbeddedStoreDir = dir
	k, err := kvwatch.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := k.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer k.Shutdown(ctx)
	<-k.Ready()

	snapshots, stop := k.Subscribe()
	defer stop()
	if err := k.Publish(ctx, kvwatch.Nodes, names.NodeKey("node-1"), []byte(`{"state":"SERVING"}`)); err != nil {
		log.Fatal(err)
	}
	for s := range snapshots {
		if e, ok := s.Get(kvwatch.Nodes, "node-1"); ok {
			fmt.Printf("%s stale=%v\n", e.Value, s.Stale())
			break
		}
	}
	// Output: {"state":"SERVING"} stale=false
}
