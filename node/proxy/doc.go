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
// flight of attempts; each caller gets its own copy of the body. A flight
// belongs to no caller and runs on no goroutine of its own: the first
// Get starts it, a timer starts its backup attempts and ends it at
// Timeout, and the answers of its attempts decide the rest. So one
// caller leaving does not fail the others; the last one leaving cancels
// it.
//
// The proxy keeps no answers: the node's answer cache (package node,
// [storage] hot_cache) holds proxied answers beside local ones, per
// version, and asks the proxy only on a miss.
//
// # Peers, connections and batches
//
// Attempts do not each get a request. Each peer has a queue, and
// senders, goroutines that each send one request at a time on a
// keep-alive connection of one http.Transport (injected or made by New)
// and report the answers to the flights. A sender takes the oldest
// waiting attempt and the others of the same db, version and raw, up to
// MaxBatchKeys and MaxBatchBytes: one attempt goes as the GET above,
// several as one
//
//	POST http://<peer>/<db>/_batch?proxy=<version>[&raw=1]
//
// in edge/BATCH.md's format, answered item by item (found: 200,
// missing: 404, failed: the attempt fails). An attempt for a peer with no
// sender starts one and goes at once, alone; attempts queued while a
// request to the peer is in flight go together in the next one; a second
// sender, up to MaxConnsPerPeer, starts only when a full batch waits. So
// an idle node sends each lookup at once, and a busy one sends few,
// large requests. A request costs a peer, and this node, about as much
// CPU as a lookup (HTTP parsing, a syscall and a wake-up each way), so
// batching cuts the cost of a proxied lookup to a fraction; it also
// keeps the connections to a peer few. A peer that refuses a batch as a
// whole — 400, 405 or 413 (it does not take batches, or not this
// large), 500 (a key's partition is not held there), or a reply that
// does not parse — is asked its keys one by one, so that each lookup
// ends as it would have without batching.
//
// # Metrics
//
// With Config.Registerer: spangle_proxy_requests_total{outcome},
// spangle_proxy_attempts_total{outcome}, spangle_proxy_duration_seconds,
// spangle_proxy_coalesced_total and spangle_proxy_request_keys (requests
// sent to peers by the lookups each carried: how much batching happens).
//
// # Caveats
//
//   - A peer that answers 200 or 404 with another version than the one
//     asked for fails the attempt. sequins peers fell back to their current
//     version; spangle peers answer 501 instead.
//   - Backup requests cost load: with StageTimeout below a peer's usual
//     latency, most lookups are sent twice. A request whose attempts are
//     all cancelled closes its connection instead of returning it to the
//     pool; one that still carries a wanted attempt runs on.
//   - An attempt waits in its peer's queue while a request to that peer
//     is in flight (all MaxConnsPerPeer of them once a full batch
//     waits): a lookup can wait one request's round trip before it is
//     sent. When that request hangs, the attempt waits until it ends (at
//     Timeout at the latest, sooner when all its lookups are answered
//     elsewhere), and its lookup's backup attempt on another peer
//     answers meanwhile, as it would for a hung request of its own.
//   - A batch waits for its slowest key, and a peer reads its keys one
//     after another: MaxBatchKeys bounds how long one request takes.
//   - An answer that came in a batch has no ETag or Last-Modified.
//   - Peers must take batches of MaxBatchKeys keys and MaxBatchBytes
//     (edge's MaxBatchKeys and MaxBatchBytes, 1000 and 1 MiB by
//     default); a peer that refuses them still answers, key by key, at a
//     request per key.
//   - A caller that leaves early does not stop a flight other callers
//     share; the flight runs until its answer or Timeout.
//   - Escaped keys triple in length on the wire: a key over about 300 KB
//     exceeds Go's default 1 MB header limit on the peer.
//   - Peers is used as given: the caller drops this node and draining
//     nodes from it.
package proxy
