// Package client is a Go client for spangle: single and batch lookups over
// HTTP (a list of nodes) or NATS (partition-aware).
//
// # Model
//
// A Client is created with New from a Config holding either node URLs or a
// NATS connection, started with Start and closed with Close. Get looks up
// one key, GetMany many keys in one request, answered from one version.
// Both retry what may pass elsewhere or later (connection errors,
// timeouts, "no responders", 5xx) up to Config.Attempts times, each
// bounded by Config.Timeout, with a doubling backoff with jitter.
//
// Over HTTP, a lookup is GET /<db>/<key> (every byte of the key but the
// unreserved ones percent-encoded) and a batch POST /<db>/_batch; the
// first node asked rotates over Config.URLs, and a failed attempt moves on
// to the next one. Connections are kept alive.
//
// Over NATS, the client reads the cluster map from the cluster's KV
// buckets (spangle_<cluster>_nodes, _partitions, _versions) with
// read-only watchers: it never creates or writes a bucket, and never
// starts a server. For a db whose live version it knows, Get computes the
// key's partition with the version's partitioner and sends the key to
// spangle.<cluster>.part.<db>.<version>.<p>, where only the nodes holding
// that partition listen, in one queue group: one hop, with NATS spreading
// the load over the replicas. When nobody answers there ("no responders":
// the version was retired, its replicas left) or the map cannot say (the
// db is not in it yet, a Wasm partitioner the client was not given), the
// key goes to spangle.<cluster>.get.<db>, where any node answers. GetMany
// uses spangle.<cluster>.mget.<db>. Map returns the map, for tools.
//
// # Errors
//
// A missing key is a Result with Found false and a nil error. A db that is
// unknown or has no version yet is ErrUnknownDB. Other answers are a
// *StatusError with the node's status and reason; errors.Is(err,
// ErrTooLarge) for 413. When every attempt failed, the error wraps
// ErrUnavailable and the last failure.
//
// # Caveats
//
//   - The map follows the buckets with a lag of milliseconds; a lookup
//     routed with a stale map is answered from a newer version by the node
//     (see Spangle-Version), or falls back to the get subject.
//   - The client notices a NATS reconnect every Config.MapRetry and then
//     reads the buckets again; until then, after a server restart, map
//     updates may be late.
//   - A batch answer must fit NATS's max_payload (1 MiB by default): for
//     many large values, split the batch or use HTTP.
//   - Wasm partitioners are not fetched from the cluster: pass them in
//     Config.Partitioners (plugins.OpenPartitioner) to route their dbs in
//     one hop.
package client
