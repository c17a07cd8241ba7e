package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}} {
		in := append([]float64(nil), tc.in...)
		if got := median(in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
		for i := range in {
			if in[i] != tc.in[i] {
				t.Errorf("median modified its argument: %v", in)
			}
		}
	}
}

func TestPublishCounts(t *testing.T) {
	out := "publishing bench/1: 16 files, 254.2 MiB\n" +
		"publishing bench/1: 3/16 files (2 uploaded, 1 skipped), 40.0 MiB/254.2 MiB sent, 80.0 MiB/s, ETA 3s\n" +
		"published bench/1 to nats-object://b: 16 files, 15 uploaded, 1 skipped, 266 bytes uploaded in 1s (1 B/s), 0 retries\n"
	if up, sk := publishCounts(out); up != 15 || sk != 1 {
		t.Errorf("publishCounts = %d, %d; want the summary's 15, 1", up, sk)
	}
	if up, sk := publishCounts("spangle: connection refused\n"); up != -1 || sk != -1 {
		t.Errorf("publishCounts without a summary = %d, %d", up, sk)
	}
}

// TestReportPrintsNewFigures: the cluster's upgrades and the publish
// scenario's figures appear in the printed report.
func TestReportPrintsNewFigures(t *testing.T) {
	r := &report{Scenarios: []scenarioResult{
		{Name: "cluster", Cluster: &clusterResult{Records: 500000, ConvergeSecs: 0.5, ThroughputRatio: 0.3,
			Upgrades: &upgradeResult{Upgrades: 20, Records: 20000, Readers: 6, Requests: 12345, SwitchMeanSecs: 0.4, SwitchMaxSecs: 0.9}}},
		{Name: "publish", Publish: &publishResult{Records: 2000000, Files: 16, Bytes: 266_000_000,
			PublishSecs: []float64{1.2, 1.3}, RawPutSecs: []float64{1, 1.1}, PublishMBps: 212, RawPutMBps: 253, Ratio: 0.84,
			CopyMBps: 1400, LastPublishSecs: 1.25, ServeSecs: 9.5, RepublishSecs: 0.4}},
	}}
	r.finish()
	var b bytes.Buffer
	r.print(&b)
	for _, want := range []string{
		"upgrades under load: 20 upgrades (20000 records each), 6 readers over the nodes: 12345 requests, 0 failed, 0 version regressions",
		"spangle publish", "212.0 MB/s", "0.84x raw Put", "raw Put, one object (baseline)", "253.0 MB/s",
		"its exit -> every node serving", "9.50 s", "publish again (all skipped)", "result: OK",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "conns") {
		t.Errorf("empty load table printed:\n%s", b.String())
	}
}
