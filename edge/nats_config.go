package edge

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spangledb/spangle/kvwatch/names"
)

// NATSConfig configures a NATSServer. Start from DefaultNATSConfig, set
// Conn and Backend; NewNATSServer calls Validate.
type NATSConfig struct {
	// Conn is the connection the front door subscribes on. Required. The
	// caller owns it (spangle serve passes kvwatch's) and must keep it
	// open until Shutdown returns; the front door never closes it. While
	// it is disconnected, the subscriptions wait for the reconnect.
	Conn *nats.Conn
	// ClientConn, when set, is a second connection, logged into the
	// clients' NATS account (kvwatch.KV.LookupConn): the front door
	// subscribes on it as on Conn, so that the clients' lookups are
	// answered in their own account and cross no service import
	// (docs/SECURITY.md). The caller owns it as it owns Conn. Default nil.
	ClientConn *nats.Conn

	// Backend answers lookups and tells which versions are held. Required.
	Backend NATSBackend
	// List answers key listings (the list subject); *node.Node
	// implements it. Default nil: listings are answered 501.
	List ListBackend

	// ClusterName is the spangle cluster: subjects start with
	// "spangle.<ClusterName>.". It must match ^[-_a-zA-Z0-9]+$. Default
	// "spangle".
	ClusterName string

	// MaxBatchKeys bounds the keys of one batch lookup (mget); more is
	// 413. Default 1000.
	MaxBatchKeys int
	// MaxListKeys is the default and the largest limit of a key listing
	// (list); a larger one is 400. Default 1000 (spangle serve: [http]
	// max_list_keys).
	MaxListKeys int
	// MaxBatchBytes bounds a batch request's payload; more is 413. The
	// NATS server's max_payload (1 MiB by default) bounds every request
	// and reply as well. Default 1 MiB.
	MaxBatchBytes int

	// Handlers is how many subscriptions, each with its own goroutine,
	// share the get and mget subjects (one queue group): nats delivers a
	// subscription's messages one at a time, so one subscription would
	// handle every single and batch lookup of the node in turn. Each part
	// subject has one (a node holds many partitions). Default
	// runtime.GOMAXPROCS(0).
	Handlers int

	// ReplyPrefixes are the reply subjects answered: a request whose reply
	// does not start with one of them is dropped unanswered, counted and
	// logged (nats_reply.go says why). Each ends with "." and names no
	// system subject ("$…"). Default "_INBOX." (nats.go's inboxes) and
	// "_R_." (a requester's reply as a service import from another
	// account rewrites it). A client with a custom inbox prefix
	// (nats.CustomInboxPrefix) needs its prefix here (spangle serve:
	// [nats] reply_prefixes).
	ReplyPrefixes []string

	// RetryInterval is the pause before a subscription that failed (the
	// connection was closed) is tried again. Default 1s.
	RetryInterval time.Duration

	// Logger receives failed requests (never successes) and subscription
	// changes. Default nil: discard.
	Logger *slog.Logger

	// Registerer is where the NATS metrics are registered. Default nil: a
	// private registry.
	Registerer prometheus.Registerer

	// AccessLog, when set, gets a line for every request answered
	// (accesslog_nats.go); the caller starts it and shuts it down after
	// the server. Default nil: none.
	AccessLog *AccessLog
}

// DefaultNATSConfig returns a NATSConfig with every default set and no Conn
// or Backend.
func DefaultNATSConfig() NATSConfig {
	return NATSConfig{
		ClusterName:   "spangle",
		MaxBatchKeys:  DefaultMaxBatchKeys,
		MaxBatchBytes: DefaultMaxBatchBytes,
		MaxListKeys:   1000,
		RetryInterval: time.Second,
		ReplyPrefixes: []string{"_INBOX.", "_R_."},
		Handlers:      runtime.GOMAXPROCS(0),
	}
}

// Validate reports the first invalid field, wrapping ErrInvalidConfig.
func (c *NATSConfig) Validate() error {
	switch {
	case c.Conn == nil:
		return fmt.Errorf("%w: Conn is nil", ErrInvalidConfig)
	case c.Backend == nil:
		return fmt.Errorf("%w: Backend is nil", ErrInvalidConfig)
	case !names.Valid(c.ClusterName):
		return fmt.Errorf("%w: ClusterName %q must match ^[-_a-zA-Z0-9]+$", ErrInvalidConfig, c.ClusterName)
	case c.MaxBatchKeys <= 0:
		return fmt.Errorf("%w: MaxBatchKeys %d is not positive", ErrInvalidConfig, c.MaxBatchKeys)
	case c.MaxListKeys <= 0:
		return fmt.Errorf("%w: MaxListKeys %d is not positive", ErrInvalidConfig, c.MaxListKeys)
	case c.MaxBatchBytes <= 0:
		return fmt.Errorf("%w: MaxBatchBytes %d is not positive", ErrInvalidConfig, c.MaxBatchBytes)
	case c.Handlers <= 0:
		return fmt.Errorf("%w: Handlers %d is not positive", ErrInvalidConfig, c.Handlers)
	case c.RetryInterval <= 0:
		return fmt.Errorf("%w: RetryInterval %v is not positive", ErrInvalidConfig, c.RetryInterval)
	}
	if err := CheckReplyPrefixes(c.ReplyPrefixes); err != nil {
		return fmt.Errorf("%w: ReplyPrefixes: %w", ErrInvalidConfig, err)
	}
	return nil
}

// CheckReplyPrefixes reports what is wrong with a list of reply prefixes
// (NATSConfig.ReplyPrefixes): it must not be empty (no request could be
// answered), and each must be whole tokens followed by "." ("_INBOX."),
// so that it cannot match the start of another token, and not a system
// subject ("$JS.", "$KV.", …), which are what the prefixes keep answers
// away from.
func CheckReplyPrefixes(prefixes []string) error {
	if len(prefixes) == 0 {
		return errors.New("empty: no request could be answered")
	}
	for _, p := range prefixes {
		switch {
		case !strings.HasSuffix(p, ".") || !plainSubject(strings.TrimSuffix(p, ".")):
			return fmt.Errorf("%q must be whole tokens ending with \".\", without wildcards or white space (e.g. \"_INBOX.\")", p)
		case strings.HasPrefix(p, "$"):
			return fmt.Errorf("%q is a system subject ($JS, $KV, $O, $SYS…): answers must never go there", p)
		}
	}
	return nil
}

// SubjectPrefix returns the subject prefix of a cluster's NATS front door,
// "spangle.<cluster>", as nodes advertise it (node.Config.AdvertiseSubjects).
func SubjectPrefix(cluster string) string { return names.Prefix(cluster) }
