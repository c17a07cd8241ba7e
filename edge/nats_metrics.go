package edge

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// natsMetrics are the NATS front door's metrics: by operation (get, part,
// mget, list), not by db, so that they stay few.
type natsMetrics struct {
	requests *prometheus.CounterVec   // spangle_nats_requests_total{op,code}
	duration *prometheus.HistogramVec // spangle_nats_request_duration_seconds{op}
	parts    prometheus.Gauge         // spangle_nats_part_subscriptions
	refused  *prometheus.CounterVec   // spangle_nats_refused_replies_total{op,reason}
	panics   prometheus.Counter       // spangle_panics_total{door="nats"}

	get, part, mget, list *natsOp
}

// natsOp holds one operation's label-bound handles.
type natsOp struct {
	name     string
	requests *prometheus.CounterVec
	duration prometheus.Observer
	codes    [len(lookupCodes)]prometheus.Counter
	refused  map[string]prometheus.Counter // by reason (refusedReasons)
}

func newNATSMetrics(reg prometheus.Registerer) (*natsMetrics, error) {
	m := &natsMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spangle_nats_requests_total",
			Help: "Requests answered by the NATS front door, by operation (get, part, mget, list) and Spangle-Status.",
		}, []string{"op", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "spangle_nats_request_duration_seconds",
			Help:    "Time to answer a NATS request, from its delivery to the handler, by operation.",
			Buckets: durationBuckets,
		}, []string{"op"}),
		parts: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "spangle_nats_part_subscriptions",
			Help: "Partition subjects this node answers.",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spangle_nats_refused_replies_total",
			Help: "NATS requests dropped unanswered for their reply subject, by operation and reason: prefix (not under [nats] reply_prefixes), invalid (a wildcard, an empty token or white space), none (no reply subject).",
		}, []string{"op", "reason"}),
	}
	var err error
	if m.requests, err = register(reg, m.requests); err != nil {
		return nil, err
	}
	if m.duration, err = register(reg, m.duration); err != nil {
		return nil, err
	}
	if m.parts, err = register(reg, m.parts); err != nil {
		return nil, err
	}
	if m.refused, err = register(reg, m.refused); err != nil {
		return nil, err
	}
	panics, err := newPanicCounter(reg)
	if err != nil {
		return nil, err
	}
	m.panics = panics.WithLabelValues("nats")
	for _, op := range []struct {
		name string
		dst  **natsOp
	}{{"get", &m.get}, {"part", &m.part}, {"mget", &m.mget}, {"list", &m.list}} {
		o := &natsOp{name: op.name, requests: m.requests, duration: m.duration.WithLabelValues(op.name),
			refused: make(map[string]prometheus.Counter, len(refusedReasons))}
		for _, reason := range refusedReasons {
			o.refused[reason] = m.refused.WithLabelValues(op.name, reason)
		}
		for i, code := range lookupCodes {
			o.codes[i] = m.requests.WithLabelValues(op.name, strconv.Itoa(code))
		}
		*op.dst = o
	}
	return m, nil
}

// observe counts one request answered with status after d.
func (o *natsOp) observe(status int, d time.Duration) {
	o.duration.Observe(d.Seconds())
	if i := codeIndex(status); i >= 0 {
		o.codes[i].Inc()
		return
	}
	o.requests.WithLabelValues(o.name, strconv.Itoa(status)).Inc()
}
