// Package edge is spangle's HTTP front door: key lookups, status pages,
// health checks and metrics. It speaks sequins' HTTP API where sequins was
// right, so sequins clients keep working, and departs from it where sequins
// was wrong (see "Differences from sequins").
//
// # Model
//
// A Server wraps a Backend, the three methods edge needs from a node
// (Get, Status, Ready); edge holds no version logic. Server is an
// http.Handler, so it can be mounted anywhere, and it can also run itself
// on an http.Server with Config's timeouts (Serve, Shutdown). It routes by
// hand on the percent-decoded path (no ServeMux, no path cleaning):
//
//	request                      answer
//	GET /<db>/<key>              the value (see "Lookups")
//	GET /                        every db's status: JSON or HTML dashboard
//	GET /<db>, GET /<db>/        that db's status; 404 if unknown (501 with ?proxy=)
//	GET /healthz                 sequins' health check (see "Health")
//	GET /livez                   200 "ok" while the process runs
//	GET /readyz                  200 "ok" when Backend.Ready, else 503
//	GET /metrics                 Prometheus exposition of Config.Gatherer
//	GET //<anything>             400: empty db name
//	HEAD <any of the above>      as GET, without the body (same Content-Length)
//	other methods                405 with "Allow: GET, HEAD"
//
// The key is everything after the first "/" that follows the db, decoded:
// it may contain "/" and any byte, so /baby-names/1881%2Fboy and
// /baby-names/1881/boy name the same key. The query string is ignored
// except for proxy=<version>, which marks a peer's request: it is passed
// to Backend.Get as GetOptions.Version and changes some statuses below.
//
// Status pages are JSON (application/json) when any element of Accept is
// application/json with a non-zero q, and an HTML dashboard otherwise. The
// global JSON is node.Status ({"dbs": ..., "shard_id": ...}); a db's is its
// node.DBStatus ({"versions": ...}), with sequins' field names. The
// dashboard shows, per db and version, the nodes with their state and the
// partitions they hold, the replication counters, build progress and
// errors; it reloads itself every few seconds.
//
// # Lookups
//
// One table in errors.go (wireCodes) maps Backend.Get's answers to
// statuses; this is the same table:
//
//	Get's answer                        status  with ?proxy=  headers, body
//	found                               200     200           value headers, the value
//	found, If-None-Match matches        304     304           ETag, version, Cache-Control
//	not found (nil error)               404     404           version, empty
//	node.ErrUnknownDB                   404     501           empty
//	node.ErrNoVersion                   404     501           empty
//	node.ErrUnknownVersion              501     501           empty
//	node.ErrPartitionNotHeld            500     500           short text
//	node.ErrNoReplica                   502     502           short text
//	node.ErrProxyTimeout                504     504           short text
//	context.DeadlineExceeded            504     504           short text
//	client went away (ctx done)         499     499           (nobody reads it)
//	any other error                     500     500           short text, logged
//
// Errors match with errors.Is, so wrapped errors map the same. A context
// error counts as "client went away" only when the request's own context
// is done; otherwise it is an ordinary error.
//
// A 200 carries X-Spangle-Version, Last-Modified (Result.Modified, when
// set), a strong ETag (the 64-bit xxhash of the value: it depends on the
// bytes only, so every node and version with the same value agree),
// Cache-Control (Result.CacheControl, when set), Content-Type
// (Result.ContentType, else application/octet-stream; never sniffed),
// X-Content-Type-Options: nosniff and Content-Length (for GETs of values
// up to 2 KiB net/http computes it, which saves work on the hot path; the
// header on the wire is the same). If-None-Match is
// compared weakly (RFC 9110 §13.1.2): "*", lists and W/ tags work. When
// the backend proxied the lookup, X-Spangle-Proxied-To names the peer.
// With Config.SequinsHeaders, X-Sequins-Version and X-Sequins-Proxied-To
// are sent as well.
//
// # Health
//
// /healthz answers as sequins did: {"<db>": {"<version>": <this node's
// node.NodeVersionStatus>}}, where this node's entry is the one keyed by
// Config.NodeName in node.VersionStatus.Nodes; every db is listed, with
// the versions this node has an entry for. The status is 200 if any of
// those is ACTIVE or BUILDING, else 404 (also when there are no dbs).
// "healthcheck" is an ordinary db name, as in sequins.
//
// # Metrics
//
// Key lookups, and only they, are counted on Config.Registerer:
//
//	spangle_http_requests_total{db,code}        counter
//	spangle_http_request_duration_seconds{db}   histogram, 50µs to 5s
//	spangle_http_inflight_requests              gauge
//
// The db label is the db's name once the backend has shown that it knows
// the db (a lookup found or missed a key, or failed with an error that
// only a known db can have: no version, unknown version, partition not
// held, no replica, proxy timeout). Other lookups, chiefly those for
// unknown dbs, are counted with db="" (no real db has an empty name), so
// clients cannot grow the label set by asking for made-up dbs. Each db's
// label-bound handles are cached, so the hot path neither hashes labels
// nor allocates for metrics.
//
// # Differences from sequins
//
//   - HEAD is served (sequins: 400); other methods get 405 with Allow
//     (sequins: 400).
//   - Content-Type comes from the db's config or is application/octet-stream,
//     with nosniff (sequins let Go sniff it). ETag, Cache-Control and
//     If-None-Match are new.
//   - Accept "application/json, */*" gets JSON (sequins wanted the header
//     to equal "application/json").
//   - /livez, /readyz and /metrics are new and reserved, as exact paths.
//
// # Caveats
//
//   - A db named healthz, livez, readyz or metrics has no status page at
//     "/<name>" (that is the endpoint); "/<name>/" and its keys work.
//   - Last-Modified is when this node activated the version, so two nodes
//     may disagree; If-Modified-Since is ignored. Use the ETag.
//   - The ETag covers the value only: the same bytes under a different
//     Content-Type (a db config change) keep their ETag.
//   - Failed lookups other than 404s are logged one line each, unthrottled;
//     during an outage (502/504) the log grows with the request rate.
//   - The status pages call Backend.Status and encode the whole view on
//     every request; they are meant for people and peers, not for load.
//   - Peer proxying and the batch multi-get are not here yet; the statuses
//     for proxy failures are.
package edge
