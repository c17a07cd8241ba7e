// Package spangle starts a complete spangle node as a library call: the
// wiring of spangle serve, for tests and for programs that embed a node.
//
//	cfg := spangle.DefaultConfig()
//	if err := spangle.LoadConfig("spangle.toml", &cfg); err != nil { … }
//	err := spangle.Run(ctx, cfg) // serves until ctx ends
//
// Start returns a running Server instead, for callers that handle signals
// themselves (Refresh on SIGHUP, Shutdown on SIGTERM), as cmd/spangle does.
//
// The packages it wires, each with one job: node (one node's version
// lifecycle), node/cluster (cluster mode behind node.Cluster), node/source
// (where versions come from), node/kvcluster (the node's NATS KV entries
// and feeds), kvwatch (NATS and its KV buckets), blocks (the partitions on
// disk), plugins (Wasm partitioners and decoders) and edge (the doors:
// HTTP, NATS subjects, the dashboard). docs/ARCHITECTURE.md draws them.
//
// # Caveats
//
//   - Start sets the process's GC percent and soft memory limit from the
//     Config unless GOGC or GOMEMLIMIT is set (zero leaves them alone):
//     an embedder that tunes its own runtime sets them to zero.
//   - Start binds the HTTP listener and serves the versions on disk at
//     once; NATS connects in the background, and its failure to start an
//     embedded server arrives on Err.
package spangle
