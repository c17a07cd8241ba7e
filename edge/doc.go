// Package edge is spangle's front doors: over HTTP, key lookups, batch
// lookups, status pages, health checks and metrics; over NATS,
// request-reply lookups (see "NATS"). It speaks sequins' HTTP API where sequins was
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
//	GET /<db>/?prefix=…          a page of keys, in order (see "Listings"): any of
//	                             prefix, start, end, limit, cursor, values makes it one
//	GET /healthz                 sequins' health check (see "Health")
//	GET /livez                   200 "ok" while the process runs
//	GET /readyz                  200 "ok" when Backend.Ready, else 503 with Config.WatchError's and SourceError's reasons
//	GET /metrics                 Prometheus exposition of Config.Gatherer
//	GET //<anything>             400: empty db name
//	HEAD <any of the above>      as GET, without the body (same Content-Length)
//	POST /<db>/_batch            a batch lookup (see "Batch lookups")
//	other methods                405 with "Allow: GET, HEAD" ("GET, HEAD, POST" on /<db>/_batch);
//	                             501 for a method RFC 9110 does not define (BREW, get)
//
// The key is everything after the first "/" that follows the db, decoded:
// it may contain "/" and any byte, so /baby-names/1881%2Fboy and
// /baby-names/1881/boy name the same key. The query string may hold
// proxy=<version>, which marks a peer's request: it is passed to
// Backend.Get as GetOptions.Version and changes some statuses below; and
// raw (GetOptions.Raw). Any other query parameter is 400 (see below).
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
//	found, not modified (see below)     304     304           ETag, version, Cache-Control, Last-Modified
//	not found (nil error)               404     404           version, negative Cache-Control, empty
//	node.ErrUnknownDB                   404     501           short text
//	node.ErrNoVersion                   404     501           short text
//	node.ErrUnknownVersion              501     501           short text
//	node.ErrWrongPartition (NATS part)  400     400           the reason, not logged
//	node.ErrPartitionNotHeld            500     500           short text
//	node.ErrNoReplica                   502     502           short text
//	node.ErrProxyTimeout                504     504           short text (listings: the partitions missing)
//	node.ErrBadListing, ErrBadCursor    400     400           the reason
//	node.ErrVersionGone                 410     410           the reason
//	node.ErrTooLarge                    413     413           the reason (a batch's values over their limit)
//	context.DeadlineExceeded            504     504           short text
//	client went away (ctx done)         499     499           (nobody reads it)
//	any other error                     500     500           short text, logged
//
// Errors match with errors.Is, so wrapped errors map the same. A context
// error counts as "client went away" only when the request's own context
// is done; otherwise it is an ordinary error.
//
// Every answer of a lookup carries X-Spangle-Version, X-Spangle-DB and,
// with Config.CacheTags, Surrogate-Key ("<db> <db>@<version>") and
// Cache-Tag ("<db>,<db>@<version>"); a 404 of a missing key carries
// Result.NegativeCacheControl, and the other failures no-store. A 200
// carries Last-Modified (Result.Modified: the version's newest source
// file time, the same on every node), a strong ETag (the 64-bit xxhash of the value: it depends on the
// bytes only, so every node and version with the same value agree),
// Cache-Control (Result.CacheControl, when set), Content-Type
// (Result.ContentType, else application/octet-stream; never sniffed),
// X-Content-Type-Options: nosniff and Content-Length (for GETs of values
// up to 2 KiB net/http computes it, which saves work on the hot path; the
// header on the wire is the same). Conditional requests follow RFC 9110
// §13.2.2, on the ETag sent (the gzip one for a gzip answer): If-Match
// (compared strongly: a W/ tag matches nothing), or without it
// If-Unmodified-Since, answers 412 (no-store) when false; then
// If-None-Match (compared weakly: "*", lists and W/ tags work), or
// without it If-Modified-Since, answers 304 when false. A date field
// that is not one HTTP-date (two lines, a list) is ignored; conditions
// on an answer other than 200 are ignored. HEAD sends GET's headers,
// gzip's Content-Length, ETag and Content-Encoding included.
//
// A key has one URL for its unreserved characters: a path that escapes a
// letter, digit, "-", "_" or "~" ("%6B" for "k"), or writes an escape in
// lower case, is redirected (301) to the canonical spelling, and a query
// parameter other than proxy and raw is 400, so that caches in front keep
// one copy of each value. Status pages, health, readiness and metrics are
// no-store; the status pages vary by Accept. When
// the backend proxied the lookup, X-Spangle-Proxied-To names the peer.
// With Config.SequinsHeaders, X-Sequins-Version and X-Sequins-Proxied-To
// are sent as well.
//
// # HTTPS
//
// With Config.TLS the door speaks HTTPS (TLS 1.2 at least) and HTTP/2 by
// ALPN. TLS (tls.go) provides that configuration from PEM files and
// reloads the certificate and the CA files without a restart: on Reload
// and when the files change; each handshake reads the current
// certificate and CAs from atomic pointers, so connections in flight are
// untouched, and a renewed file that does not load leaves the previous
// one serving (logged, counted in spangle_tls_reloads_total{result}).
// With a client CA, client certificates are required; PeerConfig is the
// matching client side for requests to peers, called for each new
// connection.
//
// # Hot keys
//
// The answers of hot keys are cached in the node's read path (package
// node, [storage] hot_cache), for every door: a lookup's node.Result
// carries the value's ETag when it came from the cache or went into it
// (the door hashes the value otherwise), and Cached, which the access
// log's hot field records.
//
// # Batch lookups
//
// POST /<db>/_batch and the NATS subject spangle.<cluster>.mget.<db> take
// many keys in one request and answer each from one version, in a compact
// binary format specified in BATCH.md (beside this file), with a worked
// example. Config.Batch answers them (BatchBackend: GetMany, which
// *node.Node has); without it, batches get 501. GET /<db>/_batch remains the lookup of the
// key "_batch". Errors use the table above, plus:
//
//	batch error                          status  body (HTTP) / Spangle-Error (NATS)
//	malformed request                    400     the decoder's reason
//	more keys than MaxBatchKeys          413     the count and the limit
//	request over MaxBatchBytes           413     the size and the limit
//	reply over NATS max_payload          413     the size and the limit (NATS only)
//
// # NATS
//
// A NATSServer answers requests on a NATS connection it is given (spangle
// serve passes kvwatch's, in-process to the embedded server):
//
//	subject                                       queue group              payload → reply
//	spangle.<cluster>.get.<db>                    spangle.<cluster>.get    key → value
//	spangle.<cluster>.part.<db>.<version>.<p>     the subject itself       key → value
//	spangle.<cluster>.mget.<db>                   spangle.<cluster>.mget   batch → batch reply
//	spangle.<cluster>.list.<db>                   spangle.<cluster>.list   listing → page (edge/LIST.md)
//
// Every node subscribes to get and mget: NATS hands each request to one
// of them. A node subscribes to the part subject of each partition it holds
// of each version it can read, following NATSBackend.Held: when a version
// becomes readable its subjects are added; when it is retired they are
// drained (requests already routed here are answered) and removed, so
// that NATS answers "no responders" once no node holds a partition, and
// the client falls back to get. A part request reads only what a get
// reads, the db's active version: a key of another partition is 400
// (node.ErrWrongPartition), and a request naming a version not active
// here (built ahead for its activation, retired since the client routed
// it) is answered from the active version, which Spangle-Version names
// (node.Node.GetPart). Which node answers a get request, and whether a
// partition is held locally, is the node's concern (NATSBackend.Get).
//
// A reply carries the value as payload and the headers Spangle-Status
// (the status the same wire-code table gives HTTP: 200, 404, 413, 500,
// 502, 504...), Spangle-Version (absent for an unknown db or a db without
// a version), Content-Type (on 200) and, on failures, Spangle-Error. A
// missing key is an empty payload with Spangle-Status 404 and the
// version; an empty value is an empty payload with 200. A reply larger
// than the server's max_payload is replaced by a 413 that says so, so that
// the requester never waits for a timeout. A request header
// Spangle-Raw: 1 asks for values as stored, skipping the db's decoder (HTTP:
// ?raw=1).
//
// kvcluster.Advertiser writes a node's entries (node.Advertiser) through
// kvwatch; they are what edge/client routes by.
//
// NATS metrics, by operation (get, part, mget) rather than by db:
//
//	spangle_nats_requests_total{op,code}         counter
//	spangle_nats_request_duration_seconds{op}    histogram, 50µs to 5s
//	spangle_nats_part_subscriptions              gauge
//	spangle_nats_refused_replies_total{op,reason} counter
//
// A request is answered only to a reply subject under
// NATSConfig.ReplyPrefixes, without wildcards: any other is dropped
// before the lookup and counted by reason (prefix, invalid, none);
// nats_reply.go says why.
//
// # Access log
//
// With Config.AccessLog (NATSConfig.AccessLog for the NATS door), every
// request answered gets a line (accesslog.go): the Combined Log Format
// followed by spangle's fields, or a JSON object. The handlers note
// what only they know — db, version answered, hot-cache hit, peer
// proxied to, keys — in the request's record (a pooled ResponseWriter
// wrapper); the line is formatted on the request's goroutine into a
// stack buffer and copied into a bounded buffer that one goroutine
// writes out, so the file's speed never reaches a request: a full buffer
// drops the line and counts it. AccessLog.Handler logs any other
// handler (the admin API).
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
// clients cannot grow the label set by asking for made-up dbs. Answers
// before a lookup are counted too: 400 (an unknown query parameter, a bad
// path), 403 (a peer request without the token) and 301 (a key spelt
// otherwise than canonically). Each db's
// label-bound handles are cached, so the hot path neither hashes labels
// nor allocates for metrics.
//
// # Differences from sequins
//
//   - HEAD is served (sequins: 400); other methods get 405 with Allow,
//     unknown ones 501 (sequins: 400).
//   - Content-Type comes from the db's config or is application/octet-stream,
//     with nosniff (sequins let Go sniff it). ETag, Cache-Control,
//     If-None-Match, If-Modified-Since and the cache tags are new.
//   - Query parameters other than proxy and raw are 400, and keys spelt
//     other than canonically redirect (sequins ignored both).
//   - Accept "application/json, */*" gets JSON (sequins wanted the header
//     to equal "application/json").
//   - /livez, /readyz and /metrics are new and reserved, as exact paths.
//
// # Listings
//
// GET /<db>/ with listing parameters, and the list subject, call
// Config.List (NATSConfig.List for the subject), a ListBackend (node.Node
// is one; without it, 501): list.go parses
// and bounds the query (limit in [1, MaxListKeys], each parameter once,
// none unknown), answers a JSON page with the db's cache headers, an ETag
// of the body and 304, and answers a peer's page (proxy=<version>,
// parts=, bytes=, with the peer token) in node/listwire; nats_list.go
// answers the list subject in node/listwire, the page bounded by
// max_payload. JSON pages carry keys and values as strings when all of
// them are valid UTF-8, else the page says "encoding":"base64" and all of
// them are base64 (docs/API.md, "Listing keys").
//
// # Caveats
//
//   - A db named healthz, livez, readyz or metrics has no status page at
//     "/<name>" (that is the endpoint); "/<name>/" and its keys work.
//   - Last-Modified is the version's newest source file time, so a value
//     unchanged across versions still gets a newer date; the ETag does not
//     change with it. A source without file times dates a version by its
//     activation on each node.
//   - The ETag covers the value only: the same bytes under a different
//     Content-Type (a db config change) keep their ETag.
//   - Failed lookups other than 404s are logged one line each, unthrottled;
//     during an outage (502/504) the log grows with the request rate.
//   - The status pages call Backend.Status and encode the whole view on
//     every request; they are meant for people and peers, not for load.
//   - NATS requests carry no deadline of their own: a lookup runs until it
//     is answered (local lookups never block), and Shutdown cancels those
//     still running once its context ends.
//   - nats.go delivers a subscription's messages one at a time, on one
//     goroutine: get and mget have NATSConfig.Handlers subscriptions each
//     (one queue group), a part subject one, so requests for one partition
//     are handled in turn and those for different partitions in parallel.
package edge
