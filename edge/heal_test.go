package edge_test

import (
	"cmp"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/edge"
	"github.com/spangledb/spangle/edge/internal/edgetest"
	"github.com/spangledb/spangle/kvwatch"
	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/assign"
	"github.com/spangledb/spangle/node/cluster"
)

// Healing over real NATS: 3 nodes, replication 2, 6 partitions of 120
// keys. Sequential assignment over shards 1, 2, 3 gives node1 {0,1,3,4},
// node2 {0,2,3,5}, node3 {1,2,4,5}: when node3 goes, each of its
// partitions is left on one node, and the other one heals it.
const (
	healParts = 6
	healKeys  = 120
)

// healNode is a cluster node with its source root, data dir and KV, so
// that it can be restarted, and its own metrics registry.
type healNode struct {
	*clusterNode
	root, data string
	kv         *kvwatch.KV
	reg        *prometheus.Registry
	opts       healOpts
}

type healOpts struct {
	maxParallel int
	disable     bool // healing off
	replication int  // 0: 2
	noBuildOnce bool // each node builds its partitions (build once off)
	http        func(*edge.Config)
	cluster     func(*cluster.Config)
}

// startHealCluster writes d/v1 (healParts partitions of healKeys keys) and
// starts one node per entry of opts on it, as startCluster does, with
// replication 2 and a short heal_after. It waits until every node serves
// d/v1 and sees its peers' partitions.
func startHealCluster(t *testing.T, opts []healOpts) []*healNode {
	t.Helper()
	root := t.TempDir()
	edgetest.WriteVersion(t, root, "d", "v1", healParts, edgetest.Numbered("v1", healKeys))
	return startHealClusterOn(t, root, opts)
}

// startHealClusterOn is startHealCluster on a source root holding d/v1.
func startHealClusterOn(t *testing.T, root string, opts []healOpts) []*healNode {
	t.Helper()
	kvs, views := startClusterNATS(t, len(opts))
	var nodes []*healNode
	var cns []*clusterNode
	for i, o := range opts {
		hn := &healNode{clusterNode: &clusterNode{shard: fmt.Sprint(i + 1), view: views[i]},
			root: root, data: t.TempDir(), kv: kvs[i], opts: o}
		hn.start(t)
		nodes, cns = append(nodes, hn), append(cns, hn.clusterNode)
	}
	for _, n := range cns {
		edgetest.WaitLoaded(t, n.Node)
	}
	waitActive(t, cns, "d", "v1")
	for _, n := range cns {
		edgetest.WaitFor(t, n.ID()+" sees its peers' partitions", func() error {
			return seesHolders(n, "d", "v1", len(cns))
		})
	}
	return nodes
}

// start starts (or restarts) the node on its root, data dir, KV and view.
func (hn *healNode) start(t *testing.T) {
	t.Helper()
	hn.reg = prometheus.NewRegistry()
	hn.clusterNode.Node = edgetest.StartNode(t, hn.kv, hn.root, edgetest.Options{
		NoWait: true,
		HTTP:   hn.opts.http,
		Node: func(c *node.Config) {
			hn.configure(c)
			c.DataDir = hn.data
			c.Registerer = hn.reg
		},
		Cluster: func(c *cluster.Config) {
			hn.configureCluster(c, cmp.Or(hn.opts.replication, 2), 1)
			c.HealAfter = 100 * time.Millisecond
			if hn.opts.maxParallel > 0 {
				c.HealMaxParallel = hn.opts.maxParallel
			}
			c.DisableHeal = hn.opts.disable
			c.DisableBuildOnce = hn.opts.noBuildOnce
			c.BuildOnceMinBytes = 0 // versions of a few hundred KB
			if hn.opts.cluster != nil {
				hn.opts.cluster(c)
			}
		},
	})
}

// metric sums the values of the metric family name in n's registry.
func (hn *healNode) metric(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := hn.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

// sequentialSets returns the partitions each of the shards "1".."n" is
// assigned.
func sequentialSets(n int) [][]int {
	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprint(i+1))
	}
	var out [][]int
	for _, id := range ids {
		out = append(out, assign.Sequential(ids, id, healParts, 2))
	}
	return out
}

// replicasInView returns, per partition of d/v1, the live holders n's
// view counts.
func replicasInView(n *clusterNode) []int {
	s, _ := n.view.Cluster()
	live := map[string]bool{}
	for _, nd := range s.Live() {
		live[nd.ID] = true
	}
	counts := make([]int, healParts)
	for _, h := range s.Holders("d", "v1") {
		if !live[h.NodeID] {
			continue
		}
		for _, p := range h.Partitions {
			counts[p]++
		}
	}
	return counts
}

// waitHealed waits until each of nodes holds want[i] of d/v1 and sees
// every partition with 2 live replicas.
func waitHealed(t *testing.T, nodes []*healNode, want [][]int) {
	t.Helper()
	for i, n := range nodes {
		edgetest.WaitFor(t, n.ID()+" holds its partitions", func() error {
			if got, _, _ := held(n.clusterNode, "d", "v1"); !slices.Equal(got, want[i]) {
				return fmt.Errorf("holds %v, want %v", got, want[i])
			}
			return nil
		})
		edgetest.WaitFor(t, n.ID()+" sees 2 replicas of each partition", func() error {
			if c := replicasInView(n.clusterNode); slices.ContainsFunc(c, func(c int) bool { return c != 2 }) {
				return fmt.Errorf("replicas per partition %v", c)
			}
			return nil
		})
	}
}

// readers reads random keys of d from nodes over HTTP until stop is
// called, checking every answer; stop returns how many reads were made.
func readers(t *testing.T, nodes []*healNode) (count func() int64, stop func()) {
	var reads atomic.Int64
	var wg sync.WaitGroup
	quit := make(chan struct{})
	for g := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for {
				select {
				case <-quit:
					return
				default:
				}
				n := nodes[g%len(nodes)]
				i := r.IntN(healKeys)
				resp, err := http.Get(fmt.Sprintf("%s/d/key-%d", n.HTTPURL, i))
				if err != nil {
					t.Errorf("%s: GET key-%d: %v", n.ID(), i, err)
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || string(body) != fmt.Sprintf("v1:%d", i) {
					t.Errorf("%s: GET key-%d: %d %q", n.ID(), i, resp.StatusCode, body)
					return
				}
				reads.Add(1)
			}
		})
	}
	var once sync.Once
	return reads.Load, func() { once.Do(func() { close(quit); wg.Wait() }) }
}

// TestClusterHeal: node3 leaves cleanly; after heal_after nodes 1 and 2
// load the partitions it held, one at a time each (heal_max_parallel 1),
// while readers of both keep getting every key right; every partition is
// back to 2 replicas; a restart of a healed node reuses what it healed.
func TestClusterHeal(t *testing.T) {
	nodes := startHealCluster(t, []healOpts{{maxParallel: 1}, {maxParallel: 1}, {maxParallel: 1}})
	sets := sequentialSets(3)
	all := []int{0, 1, 2, 3, 4, 5}

	count, stop := readers(t, nodes[:2])
	defer stop()
	edgetest.WaitFor(t, "reads before the stop", func() error {
		if count() < 20 {
			return fmt.Errorf("%d reads", count())
		}
		return nil
	})
	var read []float64 // of the source, before the heal
	for _, n := range nodes[:2] {
		read = append(read, n.metric(t, "spangle_source_read_bytes_total"))
	}
	nodes[2].Stop(t)
	waitHealed(t, nodes[:2], [][]int{all, all})
	// The lost partitions were copied from the node still holding each,
	// not loaded from the source (issue 35).
	for i, n := range nodes[:2] {
		if got := n.metric(t, "spangle_source_read_bytes_total"); got != read[i] {
			t.Errorf("%s read %v bytes of the source to heal", n.ID(), got-read[i])
		}
		if got := n.metric(t, "spangle_peer_copy_bytes_total"); got == 0 {
			t.Errorf("%s copied nothing from its peer to heal", n.ID())
		}
	}
	before := count()
	edgetest.WaitFor(t, "reads after the heal", func() error {
		if count() < before+20 {
			return fmt.Errorf("%d reads", count()-before)
		}
		return nil
	})
	stop()

	// Each partition of node3 was healed by the one node lacking it.
	var healed []int
	for i, n := range nodes[:2] {
		h := n.Status().DBs["d"].Versions["v1"].Heal
		want := slices.DeleteFunc(slices.Clone(sets[2]), func(p int) bool { return slices.Contains(sets[i], p) })
		if h == nil || !slices.Equal(h.Healed, want) || h.Failures != 0 || len(h.Loading) != 0 {
			t.Errorf("%s heal status %+v, want %v healed", n.ID(), h, want)
			continue
		}
		healed = append(healed, h.Healed...)
		// One partition per load: heal_max_parallel 1 held.
		parts, loads := n.metric(t, "spangle_heal_partitions_total"), n.metric(t, "spangle_heal_loads_total")
		if parts != float64(len(want)) || loads != parts || h.Loads != len(want) {
			t.Errorf("%s: %v partitions healed in %v loads (status %d), want %d in as many",
				n.ID(), parts, loads, h.Loads, len(want))
		}
		if vs := n.Status().DBs["d"].Versions["v1"]; vs.UnderreplicatedPartitions != 0 || vs.MissingPartitions != 0 {
			t.Errorf("%s status: %d under-replicated, %d missing", n.ID(), vs.UnderreplicatedPartitions, vs.MissingPartitions)
		}
	}
	slices.Sort(healed)
	if !slices.Equal(healed, sets[2]) {
		t.Errorf("healed %v in all, node3 held %v", healed, sets[2])
	}
	// The dashboard shows it where it shows builds.
	resp, err := http.Get(nodes[0].HTTPURL + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "healing: healed ") || !strings.Contains(string(page), " load(s)") {
		t.Errorf("the dashboard does not show the heal:\n%s", page)
	}

	// A restart of node1 serves the partitions it healed from its data
	// dir: held at once, nothing built, nothing healed again.
	n := nodes[0]
	n.Stop(t)
	n.start(t)
	edgetest.WaitLoaded(t, n.Node)
	if got, active, _ := held(n.clusterNode, "d", "v1"); !slices.Equal(got, all) || !active {
		t.Fatalf("after a restart node1 holds %v (active %v)", got, active)
	}
	if b := n.metric(t, "spangle_builds_total"); b != 0 {
		t.Errorf("the restart built %v versions", b)
	}
	for i := range healKeys {
		resp, body := httpGet(t, fmt.Sprintf("%s/d/key-%d", n.HTTPURL, i))
		if resp.StatusCode != http.StatusOK || body != fmt.Sprintf("v1:%d", i) || resp.Header.Get("X-Spangle-Proxied-To") != "" {
			t.Fatalf("restarted node1: GET key-%d: %d %q via %q", i, resp.StatusCode, body, resp.Header.Get("X-Spangle-Proxied-To"))
		}
	}
	if h := n.metric(t, "spangle_heal_partitions_total"); h != 0 {
		t.Errorf("the restarted node healed %v partitions", h)
	}
}

// TestClusterHealAfterExpiry: node3 loses NATS without withdrawing its
// entries (as a crash would); once they expire (EntryTTL), the others
// heal.
func TestClusterHealAfterExpiry(t *testing.T) {
	nodes := startHealCluster(t, []healOpts{{maxParallel: 2}, {maxParallel: 2}, {maxParallel: 2}})
	nodes[2].kv.Conn().Close()
	all := []int{0, 1, 2, 3, 4, 5}
	waitHealed(t, nodes[:2], [][]int{all, all})
}

// TestClusterHealOff: with healing off on node1, it loads nothing, even
// though node2 (healing on) heals its share and waits for node1 to heal
// the rest: the partitions node1 ranks first for stay short.
func TestClusterHealOff(t *testing.T) {
	nodes := startHealCluster(t, []healOpts{{disable: true}, {maxParallel: 1}, {maxParallel: 1}})
	sets := sequentialSets(3)
	nodes[2].Stop(t)
	// node2 heals the partitions of node3 that node1 holds.
	want2 := slices.Clone(sets[1])
	var short []int // those only node2 holds: node1 would have to load them
	for _, p := range sets[2] {
		if slices.Contains(sets[0], p) {
			want2 = append(want2, p)
		} else {
			short = append(short, p)
		}
	}
	slices.Sort(want2)
	if len(short) == 0 {
		t.Fatal("test premise: node1 should have partitions to heal")
	}
	edgetest.WaitFor(t, "node2 heals its share", func() error {
		if got, _, _ := held(nodes[1].clusterNode, "d", "v1"); !slices.Equal(got, want2) {
			return fmt.Errorf("holds %v, want %v", got, want2)
		}
		return nil
	})
	if got, _, _ := held(nodes[0].clusterNode, "d", "v1"); !slices.Equal(got, sets[0]) {
		t.Errorf("node1, healing off, holds %v, assigned %v", got, sets[0])
	}
	if h := nodes[0].Status().DBs["d"].Versions["v1"].Heal; h != nil {
		t.Errorf("node1, healing off, has heal status %+v", h)
	}
	if h := nodes[0].metric(t, "spangle_heal_partitions_total"); h != 0 {
		t.Errorf("node1, healing off, healed %v partitions", h)
	}
	edgetest.WaitFor(t, "node1's status counts the short partitions", func() error {
		if u := nodes[0].Status().DBs["d"].Versions["v1"].UnderreplicatedPartitions; u != len(short) {
			return fmt.Errorf("%d under-replicated, want %d (%v)", u, len(short), short)
		}
		return nil
	})
}
