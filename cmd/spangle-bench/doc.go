// Command spangle-bench measures a built spangle binary end to end and
// prints figures that can be compared run to run: every throughput is also
// given as a ratio against a trivial Go HTTP server measured in the same run,
// because the machines it runs on are small and noisy.
//
//	spangle-bench run [--spangle bin/spangle] [--work DIR] [--records N] [--duration 5s] [--rounds 3] [--start-rounds 3] [--conns 1,50]
//	                  [--scenarios spangle,sequins,cluster,publish,peercopy,delta,https,headers,baseline] [--zipf] [--hot-cache SIZE] [--spangle-toml TOML] [--json FILE]
//	spangle-bench gen --out DIR [--db bench] [--version 1] [--records N] [--files 16] [--key-size 16] [--value-size 100]
//	spangle-bench baseline --bind 127.0.0.1:PORT
//
// run generates a dataset (cached in the work dir), starts `spangle serve`
// on it, measures the build, loads it with wrk (Debian package wrk) at each
// connection count, and prints a table (and, with --json, saves it). The
// baseline runs beside every scenario: each measured load comes just
// after a baseline load at the same connections, its ratio is taken
// against that one, and each row is the median of --rounds such pairs
// (every round's ratio is printed too), so that the machine's drift in
// the meantime cancels. Start to serving is the median of --start-rounds
// starts on a fresh data dir, the dataset read back before each. It exits 1 if anything failed: a scenario
// that could not run, a child that did not stop cleanly, or any failed
// request (see wrkScript for which statuses count in which load).
//
// Besides throughput and latency, each load reports the server's CPU time
// per request, which varies less than throughput on a busy machine, and
// the share of the CPUs used by other processes meanwhile, which says
// whether a figure was disturbed.
//
// After its loads each serving process's RSS is split (memsplit.go): the
// binary's, the data files' and the libraries' resident pages and the
// anonymous ones, from /proc/PID/smaps (a copy, smaps-NAME.txt, stays in
// the work dir), and, for spangle, the Go heap, stacks, the runtime's
// own, the index of first keys and the answer cache from its /metrics:
// the "serving memory" table.
//
// The scenarios: spangle (one node builds the dataset, wrk loads it);
// cluster (three nodes on a smaller dataset, wrk against one of them with
// proxied and local keys, then 20 upgrades under a checking Go load:
// failed requests and per-node version regressions must be zero);
// peercopy (three nodes, replication 2, --peercopy-records, run with
// [cluster] build_once off then on: the source bytes a new version costs
// the cluster, the time a wiped node takes to serve its share and what it
// reads from the source, and the GET p99 of a serving node meanwhile;
// --peercopy-bandwidths makes the run with build once on once per
// peer_copy_bandwidth given);
// publish (the dataset uploaded by `spangle publish` to a three-node
// cluster's NATS Object Store: MB/s against a raw Object Store Put of the
// same bytes, and the time until every node serves it); delta (the
// dataset published in full to a three-node cluster, then a next version
// changing 1 % of the keys and deleting 0.1 %, published both as a delta
// over it, --base, and in full: bytes uploaded, publish to every node
// serving, and the nodes' CPU, delta/full, against issue 34's goals);
// headers (the
// baseline answering with spangle's headers, precomputed: what net/http's
// header work costs); https (spangle serving the dataset over TLS with
// [http] tls_cert, against the baseline over TLS with the same
// self-signed certificate, each load paired with that baseline's);
// baseline (a trivial Go HTTP server, loaded as spangle is). --scenarios
// picks some.
//
// With --zipf (the default) the spangle and https scenarios are loaded
// a second time with keys of a Zipf distribution of exponent 0.99
// (YCSB's "zipfian"; zipfScript), ranks spread over the keyspace, each
// load paired with a baseline load of the same script: the rows named
// "<scenario> zipf". --hot-cache sets spangle's [storage] hot_cache in
// both; --spangle-toml appends tables to the spangle scenario's config
// (`--spangle-toml '[runtime]\ngc_percent = 100'`). Every row gives the
// paired baseline load's p50 and p99 beside its own.
//
// The pieces, a file each: run.go is the run subcommand; gen.go writes the
// dataset; scenario.go holds the list of scenarios (start something, load
// it, stop it) and their common steps; baseline.go is the baseline server;
// cluster.go starts and stops a cluster and runs the cluster scenario;
// https.go the https scenario and its certificate;
// upgrades.go is its upgrades step; publish.go the publish scenario;
// peercopy.go the peercopy scenario;
// wrk.go writes the wrk script and parses what it prints; proc.go starts
// and stops child processes and reads their memory and CPU from /proc;
// report.go holds the result types, prints them and saves them.
//
// # Caveats
//
// Linux only in practice: it reads /proc for memory and CPU figures
// (elsewhere they are left at zero). wrk shares the machine with the server
// under test, so absolute figures say as much about the machine as about
// spangle: compare the ratios. The uniform rows request keys uniformly at
// random, so their figures are for a working set as large as the
// dataset; the zipf rows, for a skewed one. wrk speaks HTTP/1.1 only, so
// every spangle row measures spangle's HTTP/1.1 fast path (fasthttp), and
// the https rows TLS on it. HTTP/2 (net/http's, unchanged by the fast
// path but for where the handshake is made) is measured by the "https h2"
// rows, loads of h2load (Debian package nghttp2-client; without it the
// rows are left out, with a note) against the bare TLS handler over
// HTTP/2: one connection carrying the row's connections as concurrent
// streams, uniform keys (h2load.go says why).
package main
