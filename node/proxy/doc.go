// Package proxy sends a lookup for a partition this node does not hold to
// the replicas that do, over HTTP, the way sequins did: staged backup
// requests, first answer wins. It is a leaf package; node gives it the
// replicas, edge maps its errors to statuses.
//
// # Model
//
// A Proxy (New, Config) serves Get(ctx, Request). A Request names a db, a
// version, a key and the replicas of the key's partition ("host:port").
// Get asks them, in random order, for
//
//	GET http://<peer>/<db>/<key>?proxy=<version>[&raw=1]
//
// with db and key percent-escaped — every byte but letters, digits, '-',
// '_' and '~' as %XX, '/' and '.' included — so that any byte string
// arrives intact in the peer's URL.Path, with no "/" or ".." segment for
// an intermediary to clean away. The proxy=<version>
// parameter tells the peer the request was proxied already (it must not
// proxy it again) and which version to read.
//
// The attempts follow sequins' proxy.go (PR #59):
//
//  1. start an attempt on the first peer at once;
//  2. every StageTimeout without an answer, start one on the next peer,
//     the earlier ones still running (a backup request);
//  3. an attempt that fails — connection error, status other than 200 and
//     404, body over MaxBodyBytes, another version's answer — starts the
//     next one at once;
//  4. the first 200 or 404 wins, and the other attempts are cancelled;
//  5. Timeout caps the whole: ErrTimeout (504). All peers failed:
//     ErrNoReplica (502). The caller's context done: its error (499).
//
// Identical concurrent lookups (same db, version, key and raw) share one
// flight of attempts (golang.org/x/sync/singleflight); each caller gets
// its own copy of the body. A flight runs on the Proxy's context, not a
// caller's, so one caller leaving does not fail the others; the last one
// leaving cancels it.
//
// Answers (200 and 404) go into a bounded LRU hot cache keyed by (db,
// version, key, raw). A version never changes, so entries never go stale
// and have no TTL; a hit skips the network.
//
// Requests reuse keep-alive connections from one http.Transport (injected
// or made by New), sized for a node's fan-in.
//
// # Metrics
//
// With Config.Registerer: spangle_proxy_requests_total{outcome},
// spangle_proxy_attempts_total{outcome}, spangle_proxy_duration_seconds,
// spangle_proxy_cache_hits_total, spangle_proxy_cache_misses_total and
// spangle_proxy_coalesced_total.
//
// # Caveats
//
//   - A peer that answers 200 or 404 with another version than the one
//     asked for fails the attempt. sequins peers fell back to their current
//     version; spangle peers answer 501 instead.
//   - Backup requests cost load: with StageTimeout below a peer's usual
//     latency, most lookups are sent twice. A cancelled attempt closes its
//     connection instead of returning it to the pool.
//   - A caller that leaves early does not stop a flight other callers
//     share; the flight runs until its answer or Timeout.
//   - The cache is bounded by entries and bytes, not by age; a result over
//     an eighth of CacheBytes is not cached. Cached 404s are as durable
//     as cached values: a version is immutable.
//   - Escaped keys triple in length on the wire: a key over about 300 KB
//     exceeds Go's default 1 MB header limit on the peer.
//   - Peers is used as given: the caller drops this node and draining
//     nodes from it.
package proxy
