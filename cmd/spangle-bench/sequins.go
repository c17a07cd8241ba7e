package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"time"
)

// sequinsName is the scenario that runs stripe/sequins on the same data.
const sequinsName = "sequins"

// sequinsConf is the sequins.conf the sequins scenario writes: sequins'
// defaults (snappy-compressed sparkey files), versions complete once
// _SUCCESS exists, as spangle's scenario reads them. Source, bind and
// local store are flags.
const sequinsConf = "require_success_file = true\n"

// runSequins runs the binary given as --sequins (stripe/sequins, built
// from its source; not a dependency) on the dataset, as runSpangle runs
// spangle: from process start to the first key served, then the same
// loads. Without --sequins it is skipped.
func runSequins(ctx context.Context, b *bench) (res scenarioResult, err error) {
	res.Name = sequinsName
	if b.cfg.Sequins == "" {
		res.Notes = append(res.Notes, "skipped: no --sequins binary given")
		return res, nil
	}
	start := func() (*benchServer, error) {
		return b.startServer(sequinsName, b.cfg.Sequins, "sequins.conf", sequinsConf, func(dir, conf, addr string) []string {
			return []string{"--config", conf, "--source", b.source, "--local-store", filepath.Join(dir, "store"), "--bind", addr}
		})
	}
	srv, starts, err := b.startServing(ctx, start)
	if srv != nil {
		defer srv.stop(&res)
	}
	if err != nil {
		return res, err
	}
	c, addr := srv.c, srv.addr
	serving := starts[len(starts)-1]
	build := buildResult{WallSeconds: serving}
	build.setServing(starts)
	if hwm, err := memKiB(c.pid(), "VmHWM"); err == nil {
		build.PeakRSSMiB = mib(hwm)
	}
	res.Build = &build
	b.log.Info("sequins serving", "wall", time.Duration(serving*float64(time.Second)).Round(time.Millisecond),
		"peak_rss_mib", build.PeakRSSMiB)
	if err := b.load(ctx, &res, "http://"+addr+"/", c); err != nil {
		return res, err
	}
	b.servingRSS(c.pid(), "", &res)
	return res, nil
}

// waitServing polls GET http://addr/<db>/<last key> until it answers the
// key's value, and returns the seconds from c's start: start-to-serving,
// measured the same way for every server (a version switches whole, so
// one key served means all are).
func waitServing(ctx context.Context, c *child, base string, p genParams, timeout time.Duration) (float64, error) {
	i := p.Records - 1
	url := base + "/" + p.DB + "/" + key(i, p.KeySize)
	want := string(appendValue(nil, p.Seed, i, p.ValueSize))
	client := benchClient(5 * time.Second)
	err := pollUntil(ctx, c, timeout, pollInterval, "the last key to be served", func() error {
		resp, err := client.Get(url)
		if err != nil {
			return fmt.Errorf("%w: %v", errNotYet, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		switch {
		case err != nil:
			return fmt.Errorf("%w: %v", errNotYet, err)
		case resp.StatusCode != http.StatusOK:
			return fmt.Errorf("%w: GET %s: %s", errNotYet, url, resp.Status)
		case string(body) != want:
			return fmt.Errorf("GET %s: %.40q, want %.40q", url, body, want)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return time.Since(c.started).Seconds(), nil
}
