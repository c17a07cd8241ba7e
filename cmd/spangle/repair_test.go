package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/kvwatch/natstest"
)

// TestClusterBucketRepair runs three spangle serve processes (replication
// 2: every node proxies some keys to its peers, routed by the partitions
// and nodes buckets) with HTTP readers on every node, and under them
// deletes the partitions bucket, then purges the nodes bucket, as another
// NATS client. Every node writes its entries back (it logs so), and
// lookups fail, if at all, only within a few heartbeats of each blow:
// never afterwards.
func TestClusterBucketRepair(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three binaries")
	}
	const keys, files = 60, 6
	const entryTTL = 6 * time.Second // heartbeat: 2 s
	const window = 4 * entryTTL / 3  // two heartbeats
	root := t.TempDir()
	writeVersion(t, root, "d", "v1", files, keys)
	bin := buildBinary(t)
	natsPort := natstest.FreePort(t)
	var nodes []*clusterProc
	for id := 1; id <= 3; id++ {
		nodes = append(nodes, startClusterProc(t, bin, root, id, natsPort, 500*time.Millisecond, entryTTL, ""))
	}
	client := &http.Client{Timeout: testTimeout}
	waitFor(t, "every key of v1 readable from every node", func() error {
		proxied, err := allKeys(client, nodes, keys, "v1")
		if err == nil && proxied == 0 {
			err = fmt.Errorf("nothing proxied yet")
		}
		return err
	})
	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", natsPort))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, blow := range []struct {
		name string
		do   func(context.Context) error
	}{
		{"partitions bucket deleted", func(ctx context.Context) error {
			return js.DeleteStream(ctx, "KV_spangle_proc_partitions")
		}},
		{"nodes bucket purged", func(ctx context.Context) error {
			s, err := js.Stream(ctx, "KV_spangle_proc_nodes")
			if err != nil {
				return err
			}
			return s.Purge(ctx)
		}},
	} {
		r := startReaders(t, client, nodes, 2, keys, blow.name)
		r.waitSweeps("readers running", 1)
		before := make([]int, len(nodes))
		for i, n := range nodes {
			before[i] = countLog(n, "wrote them again")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		at := time.Now()
		err := blow.do(ctx)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", blow.name, err)
		}
		for i, n := range nodes {
			waitFor(t, fmt.Sprintf("%s: node %d repaired", blow.name, n.id), func() error {
				if countLog(n, "wrote them again") == before[i] {
					return fmt.Errorf("no repair logged")
				}
				return nil
			})
		}
		waitFor(t, "the window past", func() error {
			if time.Since(at) < window {
				return fmt.Errorf("too early")
			}
			return nil
		})
		r.waitSweeps("readers past the window", 2)
		r.halt()
		var last time.Duration
		early := 0
		for _, f := range r.takeFailures() {
			d := f.at.Sub(at)
			if d <= window {
				early++
				last = max(last, d)
				continue
			}
			t.Errorf("%s: %v after: %v", blow.name, d.Round(time.Millisecond), f.err)
		}
		t.Logf("%s: %d requests, %d failed, the last %v after", blow.name, r.requests.Load(), early, last.Round(time.Millisecond))
		if _, err := allKeys(client, nodes, keys, "v1"); err != nil {
			t.Errorf("%s: after the repair: %v", blow.name, err)
		}
	}
	for _, n := range nodes {
		if strings.Count(n.log(), `"reason":`) == 0 {
			t.Errorf("node %d logged no repair reason", n.id)
		}
	}
}
