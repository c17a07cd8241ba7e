package promreg

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestRegister registers a counter twice on one registry (the second call
// gets the first counter, so both count into it) and a conflicting one
// (an error).
func TestRegister(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := prometheus.CounterOpts{Name: "spangle_test_total", Help: "A test counter."}
	first, err := Register(reg, prometheus.NewCounter(opts))
	if err != nil {
		t.Fatal(err)
	}
	second, err := Register(reg, prometheus.NewCounter(opts))
	if err != nil || second != first {
		t.Fatalf("second registration: %v, %v; want the first counter", second, err)
	}
	second.Inc()
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetMetric()[0].GetCounter().GetValue() != 1 {
		t.Fatalf("gathered %v, %v; want one counter at 1", mfs, err)
	}
	other := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "spangle_test_total", Help: "Another help."}, []string{"x"})
	if got, err := Register(reg, other); err == nil || got != nil {
		t.Fatalf("conflicting registration: %v, %v; want an error", got, err)
	}
}
