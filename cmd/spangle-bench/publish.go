package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/spangledb/spangle/kvwatch/natsconn"
)

// The publish scenario: a three-node cluster (as the cluster scenario's,
// but with source nats-object://<publishBucket>), the main dataset
// uploaded with the real `spangle publish` to node 1's embedded NATS
// Object Store, and:
//
//   - publish throughput against a baseline in the same run: one raw
//     Object Store Put of the same bytes as a single object, from this
//     process. Rounds alternate a raw Put and a publish to a bucket the
//     nodes do not read (each bucket removed after use), so that both
//     see the same neighbours; the ratio is the median of the rounds'.
//     A local file copy of the same bytes is reported beside them, for
//     scale;
//   - the time from the exit of a last `spangle publish`, to the nodes'
//     bucket, to every node serving the version (the announcement, the
//     listing, the builds reading over NATS, the switch);
//   - a second publish of the same files, which uploads nothing.

const (
	publishBucket = "bench-data"     // the nodes' source
	sideBucket    = "bench-side"     // the measured rounds' publishes
	rawBucket     = "bench-baseline" // the raw Puts'
)

// publishResult holds the publish scenario's figures. Throughputs are in
// MB/s (10^6 bytes per second); times run from start to exit of the
// `spangle publish` process, or to the end of the raw Put.
type publishResult struct {
	Records int64 `json:"records"`
	Files   int   `json:"files"`
	Bytes   int64 `json:"bytes"`

	PublishSecs []float64 `json:"publish_seconds"` // per round
	RawPutSecs  []float64 `json:"raw_put_seconds"` // per round: the baseline
	PublishMBps float64   `json:"publish_mb_per_second"`
	RawPutMBps  float64   `json:"raw_put_mb_per_second"`
	Ratio       float64   `json:"publish_vs_raw_put"` // median over rounds of publish MB/s / raw Put MB/s
	CopyMBps    float64   `json:"local_copy_mb_per_second"`

	LastPublishSecs float64 `json:"last_publish_seconds"` // to the nodes' bucket
	ServeSecs       float64 `json:"serve_seconds"`        // from its exit to every node serving the version
	RepublishSecs   float64 `json:"republish_seconds"`    // the same files again: all skipped
}

// runPublish is the publish scenario.
func runPublish(ctx context.Context, b *bench) (res scenarioResult, err error) {
	res.Name = "publish"
	p := b.cfg.Gen
	dir := filepath.Join(b.source, p.DB, p.Version)
	files, err := filepath.Glob(filepath.Join(dir, "part-*"))
	if err != nil || len(files) == 0 {
		return res, fmt.Errorf("no part files in %s (%v)", dir, err)
	}
	pr := &publishResult{Records: p.Records, Files: len(files)}
	res.Publish = pr
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			return res, err
		}
		pr.Bytes += st.Size()
	}
	mbps := func(secs float64) float64 { return float64(pr.Bytes) / 1e6 / secs }

	tmp, err := os.MkdirTemp(b.cfg.Work, dataDirPrefix)
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(tmp)
	// The copy also brings the files into the page cache for the rounds.
	copySecs, err := copyFiles(files, filepath.Join(tmp, "copy"))
	if err != nil {
		return res, err
	}
	pr.CopyMBps = mbps(copySecs)
	if err := os.RemoveAll(filepath.Join(tmp, "copy")); err != nil {
		return res, err
	}

	nodes, natsURL, err := b.startCluster(ctx, clusterSpec{dir: tmp, source: "nats-object://" + publishBucket, logs: "publish"})
	defer stopCluster(nodes, &res)
	if err != nil {
		return res, err
	}
	o := natsconn.Options{Name: "spangle-bench"}
	nc, err := natsconn.Connect(natsURL, o)
	if err != nil {
		return res, err
	}
	defer nc.Close()
	js, err := natsconn.JetStream(nc, o)
	if err != nil {
		return res, err
	}
	// publish runs spangle publish of the dataset to bucket, announcing
	// it in cluster's versions bucket, and checks what it uploaded.
	publish := func(run, bucket, cluster string, wantUploaded int) (float64, error) {
		start := time.Now()
		c, err := startChild("spangle publish "+run, tmp, filepath.Join(b.cfg.Work, "publish-"+run+".log"), b.cfg.Spangle,
			"publish", dir, "--to", "nats-object://"+bucket, "--db", p.DB, "--version", p.Version,
			"--nats", natsURL, "--cluster", cluster)
		if err != nil {
			return 0, err
		}
		err = waitExit(ctx, c, b.cfg.BuildTimeout)
		secs := time.Since(start).Seconds()
		if err != nil {
			return 0, err
		}
		out, _ := os.ReadFile(c.logPath)
		if up, skipped := publishCounts(string(out)); up != wantUploaded || up+skipped != len(files) {
			return 0, fmt.Errorf("%s uploaded %d and skipped %d of %d files, want %d uploaded:\n%s", c.name, up, skipped, len(files), wantUploaded, out)
		}
		return secs, nil
	}

	b.log.Info("publish: cluster up; measuring", "rounds", b.cfg.PublishRounds)
	var ratios []float64
	for i := range b.cfg.PublishRounds {
		raw, err := rawPut(ctx, js, files)
		if err != nil {
			return res, fmt.Errorf("raw put: %w", err)
		}
		pub, err := publish("round"+strconv.Itoa(i+1), sideBucket, "bench-side", len(files))
		if err != nil {
			return res, err
		}
		if err := js.DeleteObjectStore(ctx, sideBucket); err != nil {
			return res, err
		}
		pr.RawPutSecs, pr.PublishSecs = append(pr.RawPutSecs, raw), append(pr.PublishSecs, pub)
		ratios = append(ratios, raw/pub)
		b.log.Info("publish: round", "raw_put_mb_per_s", int(mbps(raw)), "publish_mb_per_s", int(mbps(pub)), "ratio", fmt.Sprintf("%.2f", raw/pub))
	}
	pr.PublishMBps, pr.RawPutMBps, pr.Ratio = mbps(median(pr.PublishSecs)), mbps(median(pr.RawPutSecs)), median(ratios)

	if pr.LastPublishSecs, err = publish("last", publishBucket, "bench", len(files)); err != nil {
		return res, err
	}
	end := time.Now()
	b.log.Info("publish: published to the nodes' bucket", "mb_per_s", int(mbps(pr.LastPublishSecs)))
	if _, err := b.waitServing(ctx, nodes, p, p.Version); err != nil {
		return res, err
	}
	pr.ServeSecs = time.Since(end).Seconds()
	b.log.Info("publish: every node serves the version", "after", time.Since(end).Round(time.Millisecond))
	if pr.RepublishSecs, err = publish("again", publishBucket, "bench", 0); err != nil {
		return res, err
	}
	return res, nil
}

// median returns the median of xs (the mean of the middle two for an even
// count); 0 for none. xs is not modified.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 1 {
		return s[n/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// publishCountsRe finds the counts in spangle publish's summary line.
var publishCountsRe = regexp.MustCompile(`(\d+) uploaded, (\d+) skipped`)

// publishCounts returns the uploaded and skipped counts of the last
// summary in out, or -1s if there is none.
func publishCounts(out string) (uploaded, skipped int) {
	m := publishCountsRe.FindAllStringSubmatch(out, -1)
	if m == nil {
		return -1, -1
	}
	last := m[len(m)-1]
	uploaded, _ = strconv.Atoi(last[1])
	skipped, _ = strconv.Atoi(last[2])
	return uploaded, skipped
}

// waitExit waits up to timeout for c to exit, and returns an error unless
// it exited with status 0; on timeout or the end of ctx it stops c.
func waitExit(ctx context.Context, c *child, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.done:
		c.stopped, c.told = true, true
		if c.err != nil {
			return fmt.Errorf("%s: %w; end of %s:\n%s", c.name, c.err, c.logPath, c.logTail(20))
		}
		return nil
	case <-ctx.Done():
		_ = c.stop()
		return context.Cause(ctx)
	case <-t.C:
		_ = c.stop()
		return fmt.Errorf("%s did not finish within %v", c.name, timeout)
	}
}

// rawPut stores the files, concatenated, as one object in a new bucket of
// js, returns how long the Put took, and removes the bucket.
func rawPut(ctx context.Context, js jetstream.JetStream, files []string) (secs float64, err error) {
	obs, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: rawBucket})
	if err != nil {
		return 0, err
	}
	defer func() {
		if derr := js.DeleteObjectStore(context.WithoutCancel(ctx), rawBucket); err == nil {
			err = derr
		}
	}()
	var readers []io.Reader
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return 0, err
		}
		defer fh.Close()
		readers = append(readers, fh)
	}
	start := time.Now()
	if _, err := obs.Put(ctx, jetstream.ObjectMeta{Name: "blob"}, io.MultiReader(readers...)); err != nil {
		return 0, err
	}
	return time.Since(start).Seconds(), nil
}

// copyFiles copies files into the new directory to, and returns how long
// it took. It does not sync: neither does the NATS file store per write.
func copyFiles(files []string, to string) (float64, error) {
	if err := os.MkdirAll(to, 0o755); err != nil {
		return 0, err
	}
	start := time.Now()
	for _, f := range files {
		if err := copyFile(f, filepath.Join(to, filepath.Base(f))); err != nil {
			return 0, err
		}
	}
	return time.Since(start).Seconds(), nil
}

func copyFile(from, to string) (err error) {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, out.Close()) }()
	_, err = io.Copy(out, in)
	return err
}
