package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The upgrades step of the cluster scenario (issue 3's target: no failed
// request and no version regression across 20 upgrades under load).
// Readers GET random keys from every node while the cluster switches
// through successive small versions, each completed with _SUCCESS and
// SIGHUP; every answer must be a 200 whose value is the one of the
// version it names, and no node may answer with a version older than one
// it answered with before the request started.

// upgradeResult is what the upgrades step measured.
type upgradeResult struct {
	Upgrades       int      `json:"upgrades"` // done
	Records        int64    `json:"records"`  // of each upgrade's version; readers ask for these keys
	Readers        int      `json:"readers"`  // over all nodes
	Requests       int64    `json:"requests"`
	Failed         int64    `json:"failed"`      // not 200, a transport error, or a wrong value
	Regressions    int64    `json:"regressions"` // answers older than one the node gave before
	SwitchMeanSecs float64  `json:"switch_mean_seconds"`
	SwitchMaxSecs  float64  `json:"switch_max_seconds"` // from _SUCCESS + SIGHUP to every node answering with the version
	Examples       []string `json:"examples,omitempty"` // the first few failures and regressions
}

// maxExamples bounds upgradeResult.Examples.
const maxExamples = 5

// upgradeReadTimeout bounds each reader's request; a request that takes
// longer counts as failed.
const upgradeReadTimeout = 5 * time.Second

// upgradeVersion names the k-th upgrade of base: it sorts after base and
// after the upgrades before it, byte-wise.
func upgradeVersion(base string, k int) string { return fmt.Sprintf("%s-u%02d", base, k) }

// upgradeParams is the dataset of the k-th upgrade of p: records keys
// (all of them in p too), values from another seed, so that a value says
// which version it came from.
func upgradeParams(p genParams, k int, records int64) genParams {
	q := p
	q.Records = records
	q.Version = upgradeVersion(p.Version, k)
	q.Seed = p.Seed + uint64(k)
	return q
}

// versionFloor is the newest version a node has answered with.
type versionFloor struct {
	mu     sync.Mutex // guards newest
	newest string
}

func (f *versionFloor) get() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.newest
}

func (f *versionFloor) raise(v string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.newest = max(f.newest, v)
}

// upgradeLoad is the readers' shared state.
type upgradeLoad struct {
	nodes     []*clusterNode
	p         genParams         // the base version's dataset
	records   int64             // keys [0, records) are read
	seeds     map[string]uint64 // version → the seed of its values; read-only once readers run
	floors    []versionFloor    // per node
	requests  atomic.Int64
	failed    atomic.Int64
	regressed atomic.Int64

	mu       sync.Mutex // guards examples
	examples []string
}

func (l *upgradeLoad) example(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.examples) < maxExamples {
		l.examples = append(l.examples, fmt.Sprintf(format, args...))
	}
}

// read GETs random keys from node n until stop is closed, checking each
// answer.
func (l *upgradeLoad) read(stop <-chan struct{}, n int, seed uint64) {
	client := &http.Client{Timeout: upgradeReadTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	node := l.nodes[n]
	r := rand.New(rand.NewPCG(seed, 7))
	var want []byte
	for {
		select {
		case <-stop:
			return
		default:
		}
		i := r.Int64N(l.records)
		k := key(i, l.p.KeySize)
		floor := l.floors[n].get()
		code, version, body, err := getVersioned(client, node.addr, l.p.DB, k)
		l.requests.Add(1)
		if err != nil || code != http.StatusOK {
			l.failed.Add(1)
			l.example("%s: GET %s: %d %v", node.c.name, k, code, err)
			continue
		}
		s, ok := l.seeds[version]
		if want = appendValue(want[:0], s, i, l.p.ValueSize); !ok || !bytes.Equal(body, want) {
			l.failed.Add(1)
			l.example("%s: GET %s: version %q: value %.40q is not that version's", node.c.name, k, version, body)
			continue
		}
		if version < floor {
			l.regressed.Add(1)
			l.example("%s: GET %s: version %s after %s", node.c.name, k, version, floor)
			continue
		}
		l.floors[n].raise(version)
	}
}

// getVersioned GETs key k of db from addr: status, X-Spangle-Version and
// body.
func getVersioned(client *http.Client, addr, db, k string) (code int, version string, body []byte, err error) {
	resp, err := client.Get("http://" + addr + "/" + db + "/" + k)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Spangle-Version"), body, err
}

// upgradesUnderLoad runs the upgrades step on a cluster serving version
// p.Version of p.DB from the directory source root.
func (b *bench) upgradesUnderLoad(ctx context.Context, nodes []*clusterNode, root string, p genParams) (*upgradeResult, error) {
	n, records := b.cfg.ClusterUpgrades, b.cfg.UpgradeRecords
	res := &upgradeResult{Records: records, Readers: b.cfg.UpgradeReaders * len(nodes)}
	l := &upgradeLoad{nodes: nodes, p: p, records: records, seeds: map[string]uint64{p.Version: p.Seed},
		floors: make([]versionFloor, len(nodes))}
	var caches []string
	for k := 1; k <= n; k++ {
		q := upgradeParams(p, k, records)
		cache := filepath.Join(b.cfg.Work, "upgrade-source", q.Version)
		if _, err := generate(cache, q); err != nil {
			return res, err
		}
		caches = append(caches, cache)
		l.seeds[q.Version] = q.Seed
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range nodes {
		for j := range b.cfg.UpgradeReaders {
			wg.Add(1)
			go func() { // owned: stopped and waited for below
				defer wg.Done()
				l.read(stop, i, uint64(i*100+j))
			}()
		}
	}
	var switches []float64
	err := func() error {
		defer func() { close(stop); wg.Wait() }()
		client := &http.Client{Timeout: 5 * time.Second}
		for k := 1; k <= n; k++ {
			q := upgradeParams(p, k, records)
			dir, err := linkDataset(caches[k-1], root, q)
			if err != nil {
				return err
			}
			start := time.Now()
			if err := markAndSignal(dir, nodes); err != nil {
				return err
			}
			for _, node := range nodes {
				err := pollUntil(ctx, node.c, b.cfg.UpgradeTimeout, pollInterval, node.c.name+" to serve "+q.Version, func() error {
					_, v, _, err := getVersioned(client, node.addr, p.DB, key(0, p.KeySize))
					if err != nil || v != q.Version {
						return fmt.Errorf("%w: version %q, %v", errNotYet, v, err)
					}
					return nil
				})
				if err != nil {
					return fmt.Errorf("upgrade %d of %d: %w", k, n, err)
				}
			}
			switches = append(switches, time.Since(start).Seconds())
			b.log.Info("cluster: upgrade under load", "version", q.Version, "took", time.Since(start).Round(time.Millisecond),
				"requests", l.requests.Load(), "failed", l.failed.Load(), "regressions", l.regressed.Load())
		}
		return nil
	}()
	res.Upgrades = len(switches)
	res.Requests, res.Failed, res.Regressions = l.requests.Load(), l.failed.Load(), l.regressed.Load()
	res.Examples = l.examples
	if len(switches) > 0 {
		var sum float64
		for _, s := range switches {
			sum += s
		}
		res.SwitchMeanSecs, res.SwitchMaxSecs = sum/float64(len(switches)), slices.Max(switches)
	}
	return res, err
}
