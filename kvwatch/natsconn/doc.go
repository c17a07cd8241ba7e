// Package natsconn opens NATS connections and JetStream handles for
// spangle: kvwatch, the node's Object Store source, the edge client and
// the CLI all go through it, so that a JetStream domain, credentials or
// TLS are set in one place. It imports the NATS client only, not the
// server, so clients and tools can use it without pulling nats-server in.
//
// # Model
//
// Options say how to reach NATS (name, connect timeout, credentials, TLS)
// and which JetStream to use (Domain, APITimeout). Connect dials with
// them; JetStream opens the handle on any connection, including one the
// caller made itself (the edge client is handed its connection).
//
// # Caveats
//
//   - Connect returns the client's defaults for everything Options does
//     not set (reconnects, buffers); callers that need more pass extra
//     options, which come last and so win.
//   - Domain changes the API prefix only ($JS.<domain>.API, see
//     kvwatch/names.APIPrefix): the buckets keep their names.
package natsconn
