package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/spangledb/spangle/plugins/partition"
)

// BenchmarkGetPart compares, in alternating rounds of one process, a
// part subject's lookup (GetPart: the active version, the partition
// checked) with what it was before (Get naming the version), so that both
// see the same machine: part/get is the ratio of their times.
func BenchmarkGetPart(b *testing.B) {
	const keys = 1000
	root := b.TempDir()
	writeVersion(b, root, "d", "v1", 4, keys)
	n := newTestNode(b, root, nil)
	ks := make([][]byte, keys)
	ps := make([]int, keys)
	for i := range ks {
		ks[i] = fmt.Appendf(nil, "key-%d", i)
		ps[i], _ = partition.Sequins(ks[i], 4)
	}
	ctx := context.Background()
	var get, part time.Duration
	partRound := func() time.Duration {
		t0 := time.Now()
		for i, k := range ks {
			if res, err := n.GetPart(ctx, "d", "v1", ps[i], k, GetOptions{Raw: true}); err != nil || !res.Found {
				b.Fatal(res, err)
			}
		}
		return time.Since(t0)
	}
	getRound := func() time.Duration {
		t0 := time.Now()
		for _, k := range ks {
			if res, err := n.Get(ctx, "d", k, GetOptions{Version: "v1", Raw: true}); err != nil || !res.Found {
				b.Fatal(res, err)
			}
		}
		return time.Since(t0)
	}
	odd := false
	for b.Loop() {
		// Each goes first every other round.
		if odd = !odd; odd {
			part += partRound()
			get += getRound()
		} else {
			get += getRound()
			part += partRound()
		}
	}
	b.ReportMetric(float64(part.Nanoseconds())/float64(b.N*keys), "part-ns/key")
	b.ReportMetric(float64(get.Nanoseconds())/float64(b.N*keys), "get-ns/key")
	b.ReportMetric(float64(part)/float64(get), "part/get")
}
