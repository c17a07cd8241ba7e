package edge_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/edge/internal/edgetest"
	"github.com/spangledb/spangle/node/advert"
	"github.com/spangledb/spangle/node/cluster"
)

// builderApart is 3 nodes, replication 2, healing off, build_once_wait
// 10m, of which d/v1's builder reads a source of its own.
type builderApart struct {
	nodes       []*healNode
	builder     *healNode
	peers       []*healNode
	cns         []*clusterNode // the peers'
	root, broot string         // the peers' source, the builder's
}

// startBuilderApart starts a builderApart on two empty sources.
func startBuilderApart(t *testing.T) *builderApart {
	t.Helper()
	shards := []string{"1", "2", "3"}
	b := slices.Index(shards, strings.TrimPrefix(cluster.Builder([]string{"node1", "node2", "node3"}, "d", "v1"), "node"))
	c := &builderApart{root: t.TempDir(), broot: t.TempDir()}
	c.nodes = startNodesOn(t, func(i int) string {
		if i == b {
			return c.broot
		}
		return c.root
	}, shards, func(int) healOpts {
		return healOpts{replication: 2, disable: true, cluster: func(cc *cluster.Config) { cc.BuildOnceWait = 10 * time.Minute }}
	})
	c.builder = c.nodes[b]
	for i, n := range c.nodes {
		if i != b {
			c.peers = append(c.peers, n)
			c.cns = append(c.cns, n.clusterNode)
		}
	}
	return c
}

// waitForBuilder has nodes look for d/v1 and waits until each waits
// for its builder (build once).
func waitForBuilder(t *testing.T, nodes []*healNode) {
	t.Helper()
	for _, n := range nodes {
		n.Refresh()
	}
	for _, n := range nodes {
		edgetest.WaitFor(t, n.ID()+" waits for the builder", func() error {
			vs, ok := n.Status().DBs["d"].Versions["v1"]
			if !ok || vs.Build == nil || vs.Build.WaitingForBuilder == "" {
				return fmt.Errorf("not yet")
			}
			return nil
		})
	}
}

// TestBuildOnceForgedFailure: a NATS login that may write node entries
// (an attacker holding a node login) rewrites d/v1's builder's entry
// with a BuildFailed claim for d/v1, while the two other nodes wait for
// the builder (build_once_wait 10m; the builder's source does not have
// d/v1 yet, so it builds nothing). The claim only makes the peers build
// their own partitions from the source at once: the cluster map (what
// spangle status --nats prints) shows it, the peers count fallbacks, the
// builder takes its entry back, and once the builder's source has d/v1
// too every node holds its partitions and serves every key. It fails if
// the peers ignore the builder's claimed failure (they would wait the
// 10 minutes).
func TestBuildOnceForgedFailure(t *testing.T) {
	c := startBuilderApart(t)
	builder, peers := c.builder, c.peers
	writeOnceVersion(t, c.root)
	waitForBuilder(t, peers)

	// The attacker's own connection: it reads the builder's entry and
	// writes it back claiming the failure, again whenever the builder
	// has taken its entry back (its next refresh), until told to stop.
	nc := edgetest.Connect(t, builder.KV.ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), edgetest.Timeout)
	defer cancel()
	nodesKV, err := js.KeyValue(ctx, "spangle_"+edgetest.Cluster+"_nodes")
	if err != nil {
		t.Fatal(err)
	}
	key := advert.NodeKey(builder.ID())
	claim := advert.BuildFailure{Version: "v1", Reason: "forged: the source is unreadable"}
	forge := func() error {
		e, err := nodesKV.Get(ctx, key)
		if err != nil {
			return err
		}
		nd, err := advert.DecodeNode(key, e.Value())
		if err != nil {
			return err
		}
		if nd.BuildFailed["d"] == claim {
			return nil
		}
		nd.BuildFailed = map[string]advert.BuildFailure{"d": claim}
		forged, err := advert.Encode(nd)
		if err != nil {
			return err
		}
		_, err = nodesKV.Put(ctx, key, forged)
		return err
	}
	if err := forge(); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond) // the attacker's pace
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if err := forge(); err != nil && ctx.Err() == nil {
					t.Errorf("forging the builder's entry: %v", err)
					return
				}
			}
		}
	})
	stopForging := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopForging()

	cm := startClient(t, nc)
	edgetest.WaitFor(t, "the cluster map shows the claim", func() error {
		if got := cm.Map().Nodes[builder.ID()].BuildFailed["d"]; got != claim {
			return fmt.Errorf("the builder's failed build of d: %+v", got)
		}
		return nil
	})
	start := time.Now()
	waitActive(t, c.cns, "d", "v1")
	t.Logf("the two peers serve d/v1 %v after the claim was seen (build_once_wait 10m)", time.Since(start).Round(time.Millisecond))
	stopForging()
	if got := outcomes(t, c.nodes); got["fallback"] != 2 || got["copied"] != 0 || got["built"] != 0 || got["failed"] != 0 {
		t.Errorf("build once outcomes %v: want 2 fallbacks", got)
	}
	edgetest.WaitFor(t, "the builder takes its entry back", func() error {
		if got, ok := cm.Map().Nodes[builder.ID()].BuildFailed["d"]; ok {
			return fmt.Errorf("the builder's entry still claims %+v", got)
		}
		return nil
	})

	writeOnceVersion(t, c.broot)
	builder.Refresh()
	waitActive(t, []*clusterNode{builder.clusterNode}, "d", "v1")
	sets := sequentialSets(len(c.nodes))
	for i, n := range c.nodes {
		if got, _, _ := held(n.clusterNode, "d", "v1"); !slices.Equal(got, sets[i]) {
			t.Errorf("%s holds %v of d/v1, want %v", n.ID(), got, sets[i])
		}
		checkCopyKeys(t, n)
	}
}
