// Package objstore is the NATS JetStream Object Store source of versions
// ("nats-object://<bucket>") and the upload side that fills it (spangle
// publish).
//
// A bucket holds objects named "<db>/<version>/<file>", the same layout as a
// local source root: db and version names must be valid (source.ValidName),
// files starting with "_" or "." are not data, and with require_success_file
// a version is visible only once its "_SUCCESS" object exists. Publish
// uploads the data files first and "_SUCCESS" last, so a half-uploaded
// version is never picked up.
//
// The package lives apart from node so that node's core needs nothing of
// NATS: Source implements source.Source and is injected through
// node.Config.OpenedSource, with its connection supplied by the caller
// (spangle serve passes the kvwatch connection once NATS is up).
//
// # Caveats
//
//   - A listing lists the whole bucket (one List call), fine for thousands
//     of objects, not for millions; but only when the bucket's stream
//     changed since the last one (listing.go): otherwise the last listing
//     is reused, for the cost of a stream-info request. So an announcement
//     costs one listing, however many dbs the node serves.
//   - A publish killed mid-upload leaves the chunks of its unfinished
//     object in the bucket's stream until that file is published again.
package objstore
