package plugins

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/internal/promreg"
)

// Fault kinds, the values of the kind label of spangle_plugin_errors_total.
const (
	kindTimeout  = "timeout"
	kindCanceled = "canceled"
	kindMemory   = "memory"
	kindTrap     = "trap"
	kindExit     = "exit"
	kindBad      = "bad_result"
	kindError    = "plugin_error"
	kindInit     = "init"
)

var faultKinds = []string{kindTimeout, kindCanceled, kindMemory, kindTrap, kindExit, kindBad, kindError, kindInit}

// metrics are one module's handles on the plugin metrics, bound to its
// labels once so that a call neither hashes labels nor allocates. Safe for
// concurrent use.
type metrics struct {
	calls    [numFns]prometheus.Counter
	seconds  [numFns]prometheus.Observer
	errors   map[string]prometheus.Counter // by fault kind
	replaced prometheus.Counter
}

var (
	callsDesc = prometheus.CounterOpts{
		Name: "spangle_plugin_calls_total",
		Help: "Calls into Wasm plugins, by module identity and exported function.",
	}
	secondsDesc = prometheus.HistogramOpts{
		Name: "spangle_plugin_call_seconds",
		Help: "Duration of calls into Wasm plugins, by module identity and exported function.",
		// 1 µs to 0.26 s.
		Buckets: prometheus.ExponentialBuckets(1e-6, 4, 10),
	}
	errorsDesc = prometheus.CounterOpts{
		Name: "spangle_plugin_errors_total",
		Help: "Failed calls into Wasm plugins, by module identity and kind: timeout, canceled, memory, trap, exit, bad_result, plugin_error (reported by the guest), init (an instance failed to instantiate).",
	}
	replacedDesc = prometheus.CounterOpts{
		Name: "spangle_plugin_instances_discarded_total",
		Help: "Wasm plugin instances discarded after a fault (a new one is created on demand), by module identity.",
	}
)

// newMetrics registers the plugin metrics on reg (nil: none) and binds them
// to module. Collectors already registered by another plugin are shared.
func newMetrics(reg prometheus.Registerer, module string) (*metrics, error) {
	calls := prometheus.NewCounterVec(callsDesc, []string{"module", "func"})
	seconds := prometheus.NewHistogramVec(secondsDesc, []string{"module", "func"})
	errs := prometheus.NewCounterVec(errorsDesc, []string{"module", "kind"})
	replaced := prometheus.NewCounterVec(replacedDesc, []string{"module"})
	if reg != nil {
		var err error
		if calls, err = promreg.Register(reg, calls); err != nil {
			return nil, err
		}
		if seconds, err = promreg.Register(reg, seconds); err != nil {
			return nil, err
		}
		if errs, err = promreg.Register(reg, errs); err != nil {
			return nil, err
		}
		if replaced, err = promreg.Register(reg, replaced); err != nil {
			return nil, err
		}
	}
	m := &metrics{errors: map[string]prometheus.Counter{}, replaced: replaced.WithLabelValues(module)}
	for f := range numFns {
		name := abiFuncs[f].name
		m.calls[f] = calls.WithLabelValues(module, name)
		m.seconds[f] = seconds.WithLabelValues(module, name)
	}
	for _, k := range faultKinds {
		m.errors[k] = errs.WithLabelValues(module, k)
	}
	return m, nil
}
