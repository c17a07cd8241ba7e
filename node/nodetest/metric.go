package nodetest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric returns the value of the counter or gauge name{labels…} in reg,
// or a histogram's count of observations
// (label names and values alternate; labels not named may have any
// value), 0 if absent.
func Metric(t testing.TB, reg prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, p := range m.GetLabel() {
				have[p.GetName()] = p.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue next
				}
			}
			if m.Gauge != nil {
				return m.GetGauge().GetValue()
			}
			if m.Histogram != nil {
				return float64(m.GetHistogram().GetSampleCount())
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
