package cluster

import (
	"context"
	"errors"
	"fmt"
	"github.com/spangledb/spangle/node/source"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/node"
	"github.com/spangledb/spangle/node/advert"
	"github.com/spangledb/spangle/node/assign"
	"github.com/spangledb/spangle/node/nodetest"
	"github.com/spangledb/spangle/plugins"
)

const testTimeout = 30 * time.Second

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	nodetest.WaitFor(t, testTimeout, what, nodetest.True(cond))
}

// fakeView is a hand-written View whose snapshot the test sets.
type fakeView struct {
	mu      sync.Mutex // guards snap, changed
	snap    *Snapshot
	changed chan struct{}
}

func newFakeView() *fakeView {
	return &fakeView{snap: emptySnapshot, changed: make(chan struct{})}
}

func (f *fakeView) Cluster() (*Snapshot, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.snap, f.changed
}

// set publishes a snapshot of nodes (live, by ID) holding, per version key
// "<db>.<version>", the partitions given (of n partitions, partitioner
// sequins).
func (f *fakeView) set(ids []string, n int, holds map[string]map[string][]int) {
	var nodes []advert.Node
	var parts []advert.Partitions
	for _, id := range ids {
		nodes = append(nodes, advert.Node{ID: id, ShardID: id, State: advert.StateServing})
	}
	for key, byNode := range holds {
		db, version, _ := strings.Cut(key, ".")
		for id, ps := range byNode {
			parts = append(parts, advert.Partitions{DB: db, Version: version, NodeID: id, ShardID: id,
				Partitions: slices.Clone(ps), NumPartitions: n, Partitioner: "sequins", Active: true})
		}
	}
	s := NewSnapshot(nodes, parts, false)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.snap = s
	close(f.changed)
	f.changed = make(chan struct{})
}

// healSource is the node's file source with gates: opens of a gated
// version wait until the gate opens; opens of every version can be made to
// fail. Opens are counted.
type healSource struct {
	source.Source
	mu    sync.Mutex // guards gates, fail
	gates map[string]chan struct{}
	fail  error
	opens atomic.Int64
}

func (s *healSource) gate(version string) (open func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.gates[version] = ch
	s.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

func (s *healSource) setFail(err error) {
	s.mu.Lock()
	s.fail = err
	s.mu.Unlock()
}

func (s *healSource) Open(ctx context.Context, db, version, file string) (io.ReadCloser, error) {
	s.opens.Add(1)
	s.mu.Lock()
	gate, fail := s.gates[version], s.fail
	s.mu.Unlock()
	if fail != nil {
		return nil, fail
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Source.Open(ctx, db, version, file)
}

// healCluster is node "a" of a cluster of "a", "b", "c" whose peers exist
// only in a fakeView: version v1 of db d has 6 partitions, each node
// holding its sequential assignment with replication 2.
type healCluster struct {
	*node.Node
	cluster *Cluster
	reg     *prometheus.Registry
	root    string
	data    string
	view    *fakeView
	src     *healSource
	assign  map[string][]int // node → its partitions of v1
}

const healParts = 6

func startHealCluster(t *testing.T, data string, mod func(*Config, *node.Config)) *healCluster {
	t.Helper()
	root := t.TempDir()
	nodetest.WriteVersion(t, root, "d", "v1", healParts, nodetest.Numbered("v1", 120))
	files, err := source.Open(root, false)
	if err != nil {
		t.Fatal(err)
	}
	if data == "" {
		data = t.TempDir()
	}
	hc := &healCluster{view: newFakeView(), src: &healSource{Source: files, gates: map[string]chan struct{}{}},
		assign: map[string][]int{}, reg: prometheus.NewRegistry(), root: root, data: data}
	ids := []string{"a", "b", "c"}
	for _, id := range ids {
		hc.assign[id] = assign.Sequential(ids, id, healParts, 2)
	}
	hc.view.set(ids, healParts, map[string]map[string][]int{"d.v1": {"b": hc.assign["b"], "c": hc.assign["c"]}})
	cc := DefaultConfig()
	cc.View = hc.view
	cc.Replication = 2
	cc.TimeToConverge = 10 * time.Millisecond
	cc.HealAfter = 20 * time.Millisecond
	cc.HealMaxParallel = 1
	cc.Logger = nodetest.Logger()
	nc := node.DefaultConfig()
	nc.Source, nc.DataDir, nc.OpenedSource = root, data, hc.src
	nc.RequireSuccessFile = true
	nc.NodeID = "a"
	nc.DownloadRetries = -1
	nc.Logger = nodetest.Logger()
	nc.Registerer = hc.reg
	if mod != nil {
		mod(&cc, &nc)
	}
	if hc.cluster, err = New(cc); err != nil {
		t.Fatal(err)
	}
	nc.Cluster = hc.cluster
	if hc.Node, err = node.New(nc); err != nil {
		t.Fatal(err)
	}
	nodetest.Start(t, hc.Node)
	waitFor(t, "v1 active", func() bool { return hc.activeVersion() == "v1" })
	return hc
}

// activeVersion returns db d's active version here.
func (hc *healCluster) activeVersion() string {
	hs, _ := hc.Held()
	for _, h := range hs {
		if h.DB == "d" && h.Active {
			return h.Version
		}
	}
	return ""
}

// get looks key up in db d.
func (hc *healCluster) get(key string) (node.Result, error) {
	return hc.Get(context.Background(), "d", []byte(key), node.GetOptions{})
}

// held returns the partitions of db d's version the node holds.
func (hc *healCluster) held(version string) []int {
	hs, _ := hc.Held()
	for _, h := range hs {
		if h.DB == "d" && h.Version == version {
			return h.Partitions
		}
	}
	return nil
}

// partition returns key's partition in db d.
func (hc *healCluster) partition(key string) int {
	sequins, err := plugins.Builtin(plugins.Sequins)
	if err != nil {
		panic(err)
	}
	p, _, _ := sequins.Partition([]byte(key), healParts)
	return p
}

// healStatus returns the heal status of db d's version.
func (hc *healCluster) healStatus(version string) *node.HealStatus {
	return hc.Status().DBs["d"].Versions[version].Heal
}

// lostTo returns the partitions of v1 left held by only one node once
// "c" is gone, by that node.
func (hc *healCluster) lostTo() map[string][]int {
	out := map[string][]int{}
	for _, p := range hc.assign["c"] {
		for _, id := range []string{"a", "b"} {
			if slices.Contains(hc.assign[id], p) {
				out[id] = append(out[id], p)
			}
		}
	}
	return out
}

// TestHeal: node "c" leaves; node "a" loads, one at a time, the
// partitions only "b" still holds (with two live nodes, "a" is the only
// candidate for them), while lookups go on; it advertises them, and a
// restart reuses them without reading the source.
func TestHeal(t *testing.T) {
	data := t.TempDir()
	hc := startHealCluster(t, data, nil)
	if got := hc.held("v1"); !slices.Equal(got, hc.assign["a"]) {
		t.Fatalf("a holds %v, assigned %v", got, hc.assign["a"])
	}
	lost := hc.lostTo()
	want := lost["b"] // "a" must load these
	if len(want) < 2 {
		t.Fatalf("test premise: a should heal at least 2 partitions, got %v", want)
	}

	// Readers of every key held at the start, throughout.
	var wg sync.WaitGroup
	quit := make(chan struct{})
	var reads atomic.Int64
	for g := range 3 {
		wg.Go(func() {
			for i := g; ; i += 3 {
				select {
				case <-quit:
					return
				default:
				}
				k := i % 120
				key := fmt.Sprintf("key-%d", k)
				if !slices.Contains(hc.assign["a"], hc.partition(key)) {
					continue
				}
				res, err := hc.get(key)
				if err != nil || !res.Found || string(res.Value) != fmt.Sprintf("v1:%d", k) || res.ProxiedTo != "" {
					t.Errorf("Get(%s) = %+v, %v", key, res, err)
					return
				}
				reads.Add(1)
			}
		})
	}
	defer func() {
		close(quit)
		wg.Wait()
	}()

	open := hc.src.gate("v1")
	hc.view.set([]string{"a", "b"}, healParts, map[string]map[string][]int{"d.v1": {"b": hc.assign["b"]}})
	waitFor(t, "a heal under way", func() bool {
		h := hc.healStatus("v1")
		return h != nil && len(h.Loading) > 0
	})
	if h := hc.healStatus("v1"); len(h.Loading) != 1 || !slices.Contains(want, h.Loading[0]) {
		t.Fatalf("loading %v, want one of %v", h.Loading, want)
	}
	if got := nodetest.Metric(t, hc.reg, "spangle_heal_in_progress_partitions", "db", "d"); got != 1 {
		t.Errorf("in progress %v, want 1", got)
	}
	if free, _ := hc.cluster.slots.available(); free != 0 {
		t.Errorf("%d heal slots free during a load of 1 with heal_max_parallel 1", free)
	}
	before := reads.Load()
	waitFor(t, "reads during the heal", func() bool { return reads.Load() > before+50 })
	if slices.Contains(hc.held("v1"), hc.healStatus("v1").Loading[0]) {
		t.Fatal("a partition being loaded is readable")
	}
	open()
	waitFor(t, "a holds the lost partitions", func() bool {
		if got := nodetest.Metric(t, hc.reg, "spangle_heal_in_progress_partitions", "db", "d"); got > 1 {
			t.Fatalf("%v partitions loading at once with heal_max_parallel 1", got)
		}
		return slices.Equal(hc.held("v1"), mergeSorted(hc.assign["a"], want))
	})
	h := hc.healStatus("v1")
	if !slices.Equal(h.Healed, want) || h.Loads != len(want) || h.Failures != 0 || len(h.Loading) != 0 {
		t.Errorf("heal status %+v, want %v healed in %d loads", h, want, len(want))
	}
	expect := map[string]float64{"healed": float64(len(want)), "loads": float64(len(want))}
	for name, got := range map[string]float64{
		"healed":      nodetest.Metric(t, hc.reg, "spangle_heal_partitions_total", "db", "d"),
		"loads":       nodetest.Metric(t, hc.reg, "spangle_heal_loads_total", "db", "d"),
		"failures":    nodetest.Metric(t, hc.reg, "spangle_heal_failures_total", "db", "d"),
		"in progress": nodetest.Metric(t, hc.reg, "spangle_heal_in_progress_partitions", "db", "d"),
	} {
		if got != expect[name] {
			t.Errorf("metric %s = %v, want %v", name, got, expect[name])
		}
	}
	if st := hc.Status().DBs["d"].Versions["v1"].Nodes[hc.Name()]; !slices.Equal(st.Partitions, hc.held("v1")) {
		t.Errorf("status partitions %v, held %v", st.Partitions, hc.held("v1"))
	}
	// The healed partitions answer locally.
	for k := range 120 {
		key := fmt.Sprintf("key-%d", k)
		if !slices.Contains(want, hc.partition(key)) {
			continue
		}
		res, err := hc.get(key)
		if err != nil || string(res.Value) != fmt.Sprintf("v1:%d", k) || res.ProxiedTo != "" {
			t.Fatalf("Get(%s) of a healed partition = %+v, %v", key, res, err)
		}
	}
	// "b" heals its share: nothing is short any more, nothing more loads.
	hc.view.set([]string{"a", "b"}, healParts, map[string]map[string][]int{"d.v1": {
		"a": hc.held("v1"), "b": mergeSorted(hc.assign["b"], lost["a"])}})
	close(quit)
	wg.Wait()
	quit = make(chan struct{})

	// A restart reuses the healed partitions: held at once, no source read.
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := hc.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	again := startHealCluster(t, data, func(c *Config, _ *node.Config) { c.DisableHeal = true })
	if got := again.held("v1"); !slices.Equal(got, mergeSorted(again.assign["a"], want)) {
		t.Errorf("after a restart a holds %v", got)
	}
	if n := again.src.opens.Load(); n != 0 {
		t.Errorf("the restart read %d source files", n)
	}
}

// TestHealFailureRetried: a load that fails is counted and shown, and
// tried again after heal_after; it succeeds once the source is back.
func TestHealFailureRetried(t *testing.T) {
	hc := startHealCluster(t, "", nil)
	want := hc.lostTo()["b"]
	hc.src.setFail(fmt.Errorf("source down: %w", source.ErrPermanent))
	hc.view.set([]string{"a", "b"}, healParts, map[string]map[string][]int{"d.v1": {"b": hc.assign["b"]}})
	waitFor(t, "a heal failure", func() bool {
		h := hc.healStatus("v1")
		return h != nil && h.Failures > 0
	})
	if h := hc.healStatus("v1"); h.LastError == "" || len(h.Healed) != 0 {
		t.Errorf("after a failure: %+v", h)
	}
	if got := nodetest.Metric(t, hc.reg, "spangle_heal_failures_total", "db", "d"); got < 1 {
		t.Errorf("failures metric %v", got)
	}
	if got := hc.held("v1"); !slices.Equal(got, hc.assign["a"]) {
		t.Errorf("a holds %v after a failed heal", got)
	}
	hc.src.setFail(nil)
	waitFor(t, "a heals once the source is back", func() bool {
		return slices.Equal(hc.held("v1"), mergeSorted(hc.assign["a"], want))
	})
}

// TestHealOff: with DisableHeal no heal loop runs at all.
func TestHealOff(t *testing.T) {
	hc := startHealCluster(t, "", func(c *Config, _ *node.Config) { c.DisableHeal = true })
	select {
	case <-hc.cluster.healDone:
	default:
		t.Fatal("a heal loop runs with healing off")
	}
	// With healing on, it runs until shutdown.
	on := startHealCluster(t, "", nil)
	select {
	case <-on.cluster.healDone:
		t.Fatal("no heal loop with healing on")
	default:
	}
}

// TestHealCancelledBySwitch: a heal load of the active version is
// cancelled when the db switches to a newer one, and the old version is
// still discarded cleanly (its retention ends while the load would run).
func TestHealCancelledBySwitch(t *testing.T) {
	hc := startHealCluster(t, "", func(c *Config, nc *node.Config) {
		c.VersionRemoveTimeout = 20 * time.Millisecond
		nc.MaxParallelLoads = 16 // the gated heal holds a load slot per file; v2's build needs some
	})
	open := hc.src.gate("v1")
	defer open()
	hc.view.set([]string{"a", "b"}, healParts, map[string]map[string][]int{"d.v1": {"b": hc.assign["b"]}})
	waitFor(t, "a heal under way", func() bool {
		h := hc.healStatus("v1")
		return h != nil && len(h.Loading) > 0
	})
	nodetest.WriteVersion(t, hc.root, "d", "v2", healParts, nodetest.Numbered("v2", 120))
	all := []int{0, 1, 2, 3, 4, 5}
	hc.view.set([]string{"a", "b"}, healParts, map[string]map[string][]int{"d.v1": {"b": hc.assign["b"]}, "d.v2": {"b": all}})
	hc.Refresh()
	waitFor(t, "v2 active", func() bool { return hc.activeVersion() == "v2" })
	waitFor(t, "v1 removed here", func() bool {
		_, held := hc.Status().DBs["d"].Versions["v1"].Nodes[hc.Name()]
		_, err := os.Stat(filepath.Join(hc.data, "dbs", "d", "v1"))
		return !held && errors.Is(err, fs.ErrNotExist)
	})
	if got := nodetest.Metric(t, hc.reg, "spangle_heal_failures_total", "db", "d"); got != 0 {
		t.Errorf("a cancelled heal counted as %v failures", got)
	}
	if got := nodetest.Metric(t, hc.reg, "spangle_heal_in_progress_partitions", "db", "d"); got != 0 {
		t.Errorf("%v partitions still loading", got)
	}
	if free, _ := hc.cluster.slots.available(); free != 1 {
		t.Errorf("%d heal slots free after the cancel, want 1", free)
	}
}

func TestHealConfig(t *testing.T) {
	c := DefaultConfig()
	if c.HealAfter != time.Minute || c.HealMaxParallel != 1 || c.DisableHeal {
		t.Errorf("heal defaults: after %v, max parallel %d, disabled %v", c.HealAfter, c.HealMaxParallel, c.DisableHeal)
	}
	for name, mod := range map[string]func(*Config){
		"negative heal_after":        func(c *Config) { c.HealAfter = -time.Second },
		"zero heal_after":            func(c *Config) { c.HealAfter = 0 },
		"negative heal_max_parallel": func(c *Config) { c.HealMaxParallel = -1 },
		"zero heal_max_parallel":     func(c *Config) { c.HealMaxParallel = 0 },
	} {
		t.Run(name, func(t *testing.T) {
			c := DefaultConfig()
			c.View = newFakeView()
			mod(&c)
			if err := c.Validate(); !errors.Is(err, node.ErrConfig) {
				t.Fatalf("Validate: %v, want ErrConfig", err)
			}
		})
	}
}

// mergeSorted returns the sorted union of a and b.
func mergeSorted(a, b []int) []int {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}
