// Package advert defines the entries spangle nodes publish in their
// cluster's NATS JetStream KV buckets, and decodes them: what a node is
// (Node), which partitions of a version it holds (Partitions), and which
// version of a db is live (Version). It is a leaf package: node writes the
// entries, while edge/client and the CLI read them without depending on
// the server.
//
// # Model
//
// Each entry is a JSON object under a key built from names matching
// ^[-_a-zA-Z0-9]+$:
//
//	bucket       key                          entry       lifetime
//	nodes        <nodeID>                     Node        TTL'd, withdrawn on shutdown
//	partitions   <db>.<version>.<nodeID>      Partitions  TTL'd, withdrawn when the version is retired
//	versions     <db>                         Version     permanent, overwritten by the next activation
//
// The Decode functions check an entry against its key and against itself
// (a state spangle knows, partitions in range and in order), so that a
// reader can trust what it routes on. Unknown JSON fields are ignored, so
// that newer nodes can add fields without breaking older readers.
//
// # Caveats
//
//   - The versions entry is written by every node that activates a
//     version: the last writer wins. With one node, or nodes that switch
//     together, it names the live version; the cluster work will make one
//     writer (or a compare-and-set) decide it.
//   - Entries carry wall-clock times of the node that wrote them.
package advert
