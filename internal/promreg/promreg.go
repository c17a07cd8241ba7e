// Package promreg registers Prometheus collectors the way every spangle
// component does: a second component on one registry (two front doors in
// a test, several plugins) shares the collector the first registered
// instead of failing. A leaf: it imports only Prometheus.
package promreg

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c on reg and returns it, or returns the collector
// already registered under the same description when it is of c's type.
// Any other registration error (the same name with other labels or help,
// a collector of another type) is returned with C's zero value.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	var zero C
	return zero, err
}
