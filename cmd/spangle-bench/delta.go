package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/spangledb/spangle/blocks/seqfile"
)

// The delta scenario (issue 34): a three-node cluster reading
// nats-object://<deltaBucket>, the main dataset published in full as its
// version, then one next dataset, which changes 1 % of the keys (half
// updated, half new) and deletes 0.1 %, published twice in one run:
//
//   - as a delta over the first (spangle publish --base --cache): the
//     publisher reads the first's index from its cache (kept by the
//     first's publish), reads the next once against it (no build),
//     uploads the changes; nodes merge them into the partitions they
//     hold;
//   - in full, under the next version name: every file uploaded, every
//     node builds its partitions from the source.
//
//   - as a delta a batch job wrote itself (spangle delta, from the two
//     datasets, timed apart), published as it is: what the nodes' side
//     costs without the publisher's diff.
//
// For each: the bytes uploaded, the time from the start of the publish
// to every node serving the version, and the nodes' CPU over that time
// (the publisher's own CPU beside it). The ratios are delta/full; the
// goals are ≤ 3 % of the bytes, ≤ 0.25× the time and ≤ 0.25× the node
// CPU.

const deltaBucket = "bench-delta"

// idleWindow is how long the nodes' idle CPU is measured.
const idleWindow = 5 * time.Second

// deltaResult holds the delta scenario's figures.
type deltaResult struct {
	Records    int64    `json:"records"`
	Updated    int64    `json:"updated"`
	Added      int64    `json:"added"`
	Deleted    int64    `json:"deleted"`
	Delta      deltaRun `json:"delta"`
	Full       deltaRun `json:"full"`
	Job        deltaRun `json:"job"`                // a delta written by spangle delta, published as is
	JobSecs    float64  `json:"job_delta_seconds"`  // spangle delta's run, apart
	Bytes      float64  `json:"bytes_ratio"`        // delta / full uploaded
	Time       float64  `json:"time_ratio"`         // delta / full publish to serving
	NodeCPU    float64  `json:"node_cpu_ratio"`     // delta / full, all nodes
	JobTime    float64  `json:"job_time_ratio"`     // job / full publish to serving
	JobNodeCPU float64  `json:"job_node_cpu_ratio"` // job / full, all nodes
	Verified   int      `json:"keys_verified"`      // keys read back from the delta version
	IdleCPU    float64  `json:"node_idle_cpu"`      // all nodes\' CPU seconds per second, idle
}

// deltaRun is one publish and what it took.
type deltaRun struct {
	Version      string        `json:"version"`
	Uploaded     int64         `json:"bytes_uploaded"`
	PublishSecs  float64       `json:"publish_seconds"` // the publish process, start to exit
	PublisherCPU float64       `json:"publisher_cpu_seconds"`
	ServeSecs    float64       `json:"publish_to_serving_seconds"` // start of the publish to every node serving
	NodeCPUSecs  float64       `json:"node_cpu_seconds"`           // all nodes, over ServeSecs, less their idle CPU
	NodeCPURaw   float64       `json:"node_cpu_raw_seconds"`       // the same, idle CPU included
	Timeline     deltaTimeline `json:"timeline"`
}

// deltaTimeline is where a publish's time to serving went: seconds from
// its start, or taken, as the publisher's output and the nodes' logs
// say (0: not said).
type deltaTimeline struct {
	Computed float64 `json:"delta_computed_seconds"` // the publisher's delta or digest took ("computed in")
	Uploaded float64 `json:"uploaded_seconds"`       // its upload and announcement took ("uploaded in")
	Seen     float64 `json:"nodes_seen_seconds"`     // the first node's first line naming the version
	Build    float64 `json:"node_build_seconds"`     // the longest build of it on a node ("blocks: built")
	Active   float64 `json:"nodes_active_seconds"`   // the last node's "version active"
}

// The next dataset: record i of the main one is deleted when i%1000 ==
// 999, updated when i%200 == 7; Records/200 new records follow.
func deltaChange(i int64) (deleted, updated bool) { return i%1000 == 999, i%200 == 7 }

// writeNextDataset writes the next dataset into dir as p.Files
// SequenceFiles, and returns its counts.
func writeNextDataset(dir string, p genParams) (updated, added, deleted int64, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, 0, 0, err
	}
	added = p.Records / 200
	type file struct {
		f *os.File
		w *seqfile.Writer
	}
	files := make([]file, p.Files)
	for n := range files {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("part-%05d", n)))
		if err != nil {
			return 0, 0, 0, err
		}
		defer f.Close()
		w, err := seqfile.NewWriter(f, seqfile.WriterOptions{})
		if err != nil {
			return 0, 0, 0, err
		}
		files[n] = file{f, w}
	}
	var k, v []byte
	for i := range p.Records + added {
		seed := p.Seed
		if i < p.Records {
			del, upd := deltaChange(i)
			if del {
				deleted++
				continue
			}
			if upd {
				updated++
				seed++
			}
		}
		k = fmt.Appendf(k[:0], keyFormat(p.KeySize), i)
		v = appendValue(v[:0], seed, i, p.ValueSize)
		if err := files[i%int64(p.Files)].w.Append(k, v); err != nil {
			return 0, 0, 0, err
		}
	}
	for _, f := range files {
		if err := f.w.Close(); err != nil {
			return 0, 0, 0, err
		}
		if err := f.f.Close(); err != nil {
			return 0, 0, 0, err
		}
	}
	return updated, added, deleted, os.WriteFile(filepath.Join(dir, "_SUCCESS"), nil, 0o644)
}

var (
	uploadedBytesRe = regexp.MustCompile(`, (\d+) bytes uploaded in (\S+) `)
	computedRe      = regexp.MustCompile(`, computed in (\S+)\n`)
)

// timeline fills run's timeline from the publisher's output out and the
// nodes' logs, for a publish started at start.
func (run *deltaRun) timeline(out []byte, nodes []*clusterNode, start time.Time) {
	tl := &run.Timeline
	if m := computedRe.FindSubmatch(out); m != nil {
		d, _ := time.ParseDuration(string(m[1]))
		tl.Computed = d.Seconds()
	}
	if m := uploadedBytesRe.FindSubmatch(out); m != nil {
		d, _ := time.ParseDuration(string(m[2]))
		tl.Uploaded = d.Seconds()
	}
	for _, n := range nodes {
		b, err := os.ReadFile(n.c.logPath)
		if err != nil {
			continue
		}
		for _, line := range bytes.Split(b, []byte("\n")) {
			var e struct {
				Time    time.Time `json:"time"`
				Msg     string    `json:"msg"`
				Version string    `json:"version"`
				Seconds float64   `json:"seconds"`
			}
			if !bytes.Contains(line, []byte(`"version":"`+run.Version+`"`)) || json.Unmarshal(line, &e) != nil || e.Version != run.Version {
				continue
			}
			at := e.Time.Sub(start).Seconds()
			if tl.Seen == 0 || at < tl.Seen {
				tl.Seen = at
			}
			switch e.Msg {
			case "blocks: built":
				tl.Build = max(tl.Build, e.Seconds)
			case "version active":
				tl.Active = max(tl.Active, at)
			}
		}
	}
}

// runDelta is the delta scenario.
func runDelta(ctx context.Context, b *bench) (res scenarioResult, err error) {
	res.Name = "delta"
	p := b.cfg.Gen
	baseDir := filepath.Join(b.source, p.DB, p.Version)
	dr := &deltaResult{Records: p.Records}
	res.Delta = dr
	tmp, err := os.MkdirTemp(b.cfg.Work, dataDirPrefix)
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(tmp)
	next := filepath.Join(tmp, "next")
	if dr.Updated, dr.Added, dr.Deleted, err = writeNextDataset(next, p); err != nil {
		return res, err
	}
	nodes, natsURL, err := b.startCluster(ctx, clusterSpec{dir: tmp, source: "nats-object://" + deltaBucket, logs: "delta"})
	defer stopCluster(nodes, &res)
	if err != nil {
		return res, err
	}
	nodeCPU := func() (time.Duration, error) {
		var sum time.Duration
		for _, n := range nodes {
			s, err := sampleCPU(n.c.pid())
			if err != nil {
				return 0, err
			}
			sum += s.proc
		}
		return sum, nil
	}
	var idle float64 // the nodes' CPU seconds per second while they only serve
	publish := func(run *deltaRun, dir string, args ...string) error {
		cpu0, err := nodeCPU()
		if err != nil {
			return err
		}
		start := time.Now()
		c, err := startChild("spangle publish "+run.Version, tmp, filepath.Join(b.cfg.Work, "delta-publish-"+run.Version+".log"), b.cfg.Spangle,
			append([]string{"publish", dir, "--to", "nats-object://" + deltaBucket, "--db", p.DB, "--version", run.Version,
				"--nats", natsURL, "--cluster", "bench"}, args...)...)
		if err != nil {
			return err
		}
		if err := waitExit(ctx, c, b.cfg.BuildTimeout); err != nil {
			return err
		}
		run.PublishSecs = time.Since(start).Seconds()
		if ps := c.cmd.ProcessState; ps != nil {
			run.PublisherCPU = (ps.UserTime() + ps.SystemTime()).Seconds()
		}
		out, _ := os.ReadFile(c.logPath)
		m := uploadedBytesRe.FindSubmatch(out)
		if m == nil {
			return fmt.Errorf("%s: no summary:\n%s", c.name, out)
		}
		run.Uploaded, _ = strconv.ParseInt(string(m[1]), 10, 64)
		if _, err := b.waitServing(ctx, nodes, p, run.Version); err != nil {
			return err
		}
		run.ServeSecs = time.Since(start).Seconds()
		run.timeline(out, nodes, start)
		cpu1, err := nodeCPU()
		if err != nil {
			return err
		}
		run.NodeCPURaw = (cpu1 - cpu0).Seconds()
		run.NodeCPUSecs = max(run.NodeCPURaw-idle*run.ServeSecs, 0)
		b.log.Info("delta: served", "version", run.Version, "bytes_uploaded", run.Uploaded,
			"publish_to_serving_s", fmt.Sprintf("%.2f", run.ServeSecs), "node_cpu_s", fmt.Sprintf("%.2f", run.NodeCPUSecs))
		return nil
	}
	// The first version is published with its digest, its build kept in
	// the publisher's cache: the delta's --base reads it there, as a
	// publisher of one version a day would.
	cache := filepath.Join(tmp, "publish-cache")
	first := deltaRun{Version: p.Version}
	if err := publish(&first, baseDir, "--digest", "--cache", cache); err != nil {
		return res, err
	}
	// The nodes' CPU while idle (heartbeats, the cluster's watchers),
	// taken off each run's: the runs last from seconds to a minute.
	c0, err := nodeCPU()
	if err != nil {
		return res, err
	}
	t0 := time.Now()
	select {
	case <-time.After(idleWindow):
	case <-ctx.Done():
		return res, context.Cause(ctx)
	}
	c1, err := nodeCPU()
	if err != nil {
		return res, err
	}
	idle = (c1 - c0).Seconds() / time.Since(t0).Seconds()
	dr.IdleCPU = idle
	dr.Delta.Version, dr.Full.Version = p.Version+"-delta", p.Version+"-full"
	if err := publish(&dr.Delta, next, "--base", p.Version, "--cache", cache); err != nil {
		return res, err
	}
	if err := dr.verify(nodes[0].addr, p); err != nil {
		return res, err
	}
	if err := publish(&dr.Full, next); err != nil {
		return res, err
	}
	// The job's delta, over the first version (retired, still held).
	jobDir := filepath.Join(tmp, "job")
	start := time.Now()
	c, err := startChild("spangle delta", tmp, filepath.Join(b.cfg.Work, "delta-job.log"), b.cfg.Spangle,
		"delta", next, baseDir, "--base-name", p.Version, "--out", jobDir)
	if err != nil {
		return res, err
	}
	if err := waitExit(ctx, c, b.cfg.BuildTimeout); err != nil {
		return res, err
	}
	dr.JobSecs = time.Since(start).Seconds()
	dr.Job.Version = p.Version + "-job"
	if err := publish(&dr.Job, jobDir); err != nil {
		return res, err
	}
	dr.JobTime = dr.Job.ServeSecs / dr.Full.ServeSecs
	dr.JobNodeCPU = dr.Job.NodeCPUSecs / max(dr.Full.NodeCPUSecs, 1e-9)
	dr.Bytes = float64(dr.Delta.Uploaded) / float64(max(dr.Full.Uploaded, 1))
	dr.Time = dr.Delta.ServeSecs / dr.Full.ServeSecs
	dr.NodeCPU = dr.Delta.NodeCPUSecs / max(dr.Full.NodeCPUSecs, 1e-9)
	for _, g := range []struct {
		what       string
		got, limit float64
	}{{"bytes uploaded", dr.Bytes, 0.03}, {"publish to serving", dr.Time, 0.25}, {"node CPU", dr.NodeCPU, 0.25}} {
		if g.got > g.limit {
			res.Notes = append(res.Notes, fmt.Sprintf("%s: delta/full %.3f, over the goal of %.2f", g.what, g.got, g.limit))
		}
	}
	return res, nil
}

// verify reads keys of each kind from node addr (which proxies what it
// does not hold) while the delta version is active.
func (dr *deltaResult) verify(addr string, p genParams) error {
	client := &http.Client{Timeout: 5 * time.Second}
	for i := int64(0); i < min(p.Records, 5000); i++ {
		del, _ := deltaChange(i)
		want := http.StatusOK
		if del {
			want = http.StatusNotFound
		}
		code, _, err := clusterGet(client, addr, p.DB, key(i, p.KeySize))
		if err != nil || code != want {
			return fmt.Errorf("delta: key %d: %d %v, want %d", i, code, err, want)
		}
		dr.Verified++
	}
	code, _, err := clusterGet(client, addr, p.DB, key(p.Records, p.KeySize))
	if err != nil || code != http.StatusOK {
		return fmt.Errorf("delta: new key %d: %d %v", p.Records, code, err)
	}
	return nil
}
