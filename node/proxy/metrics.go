package proxy

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcome label values.
const (
	outcomeOK        = "ok"         // 200
	outcomeNotFound  = "not_found"  // 404
	outcomeTimeout   = "timeout"    // Get: ErrTimeout
	outcomeNoReplica = "no_replica" // Get: ErrNoReplica
	outcomeCanceled  = "canceled"   // Get: the caller left; attempt: lost the race or timed out
	outcomeClosed    = "closed"     // Get: ErrClosed
	outcomeInvalid   = "invalid"    // Get: ErrInvalidRequest
	outcomeError     = "error"      // attempt: connection or transport error
	outcomeStatus    = "status"     // attempt: a status other than 200 and 404
	outcomeTooLarge  = "too_large"  // attempt: ErrBodyTooLarge
	outcomeVersion   = "version"    // attempt: another version answered
)

type metrics struct {
	requests  *prometheus.CounterVec        // outcome
	attempts  *prometheus.CounterVec        // outcome
	byOutcome map[string]prometheus.Counter // requests, resolved once
	byAttempt map[string]prometheus.Counter // attempts, resolved once
	duration  prometheus.Histogram
	coalesced prometheus.Counter
	batchKeys prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spangle_proxy_requests_total",
			Help: "Proxied lookups (Get calls, coalesced ones included), by outcome: ok, not_found, timeout, no_replica, canceled, closed, invalid.",
		}, []string{"outcome"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spangle_proxy_attempts_total",
			Help: "Requests sent to peers, by outcome: ok, not_found, error, status, too_large, version, canceled.",
		}, []string{"outcome"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "spangle_proxy_duration_seconds",
			Help:    "Duration of proxied lookups that went to the network (one per flight, coalesced callers not repeated).",
			Buckets: prometheus.ExponentialBuckets(0.00025, 2, 14), // 250µs to about 2s
		}),
		coalesced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "spangle_proxy_coalesced_total", Help: "Proxied lookups that joined an identical one in flight.",
		}),
		batchKeys: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "spangle_proxy_request_keys",
			Help:    "Requests sent to peers, by the number of lookups each carried (1: a GET; more: a batch).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128},
		}),
	}
	m.byOutcome, m.byAttempt = map[string]prometheus.Counter{}, map[string]prometheus.Counter{}
	for _, o := range []string{outcomeOK, outcomeNotFound, outcomeTimeout, outcomeNoReplica, outcomeCanceled, outcomeClosed, outcomeInvalid} {
		m.byOutcome[o] = m.requests.WithLabelValues(o)
	}
	for _, o := range []string{outcomeOK, outcomeNotFound, outcomeError, outcomeStatus, outcomeTooLarge, outcomeVersion, outcomeCanceled} {
		m.byAttempt[o] = m.attempts.WithLabelValues(o)
	}
	if reg != nil {
		cs := []prometheus.Collector{m.requests, m.attempts, m.duration, m.coalesced, m.batchKeys}
		for i, c := range cs {
			if err := reg.Register(c); err != nil {
				for _, r := range cs[:i] {
					reg.Unregister(r)
				}
				return nil, fmt.Errorf("proxy: register metrics: %w", err)
			}
		}
	}
	return m, nil
}

func (m *metrics) outcome(o string) { m.byOutcome[o].Inc() }
func (m *metrics) attempt(o string) { m.byAttempt[o].Inc() }

func statusOutcome(status int) string {
	if status == http.StatusNotFound {
		return outcomeNotFound
	}
	return outcomeOK
}

func errOutcome(err error) string {
	switch {
	case errors.Is(err, ErrTimeout):
		return outcomeTimeout
	case errors.Is(err, ErrNoReplica):
		return outcomeNoReplica
	case errors.Is(err, ErrClosed):
		return outcomeClosed
	}
	return outcomeCanceled
}

// attemptOutcome is the attempts label of an attempt's outcome.
func attemptOutcome(res Response, err error) string {
	switch {
	case err == nil:
		return statusOutcome(res.Status)
	case errors.Is(err, ErrBodyTooLarge):
		return outcomeTooLarge
	case errors.Is(err, errStatus), errors.Is(err, errItem):
		return outcomeStatus
	case errors.Is(err, errVersion):
		return outcomeVersion
	}
	return outcomeError
}
