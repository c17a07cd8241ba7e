package node

import (
	"fmt"
	"time"

	"github.com/spangledb/spangle/node/assign"
)

// ClusterConfig configures cluster mode (the [sharding] table, with
// sequins' key names). With Enabled false, the default, the node holds
// every partition of every version and never proxies; the other fields
// are then ignored.
type ClusterConfig struct {
	// Enabled turns cluster mode on. Default false. It needs View.
	Enabled bool
	// Replication is how many nodes hold each partition of a version.
	// Default 2.
	Replication int
	// MinReplication is how many replicas every partition of a version
	// needs, cluster-wide, before a node switches its clients to it.
	// Default 1.
	MinReplication int
	// MaxReplication, when ≥ Replication, makes a node skip assigned
	// partitions that already have MaxReplication replicas on other nodes
	// (sequins' rule). Default 0: off.
	MaxReplication int
	// Assignment names the strategy: "sequential" (sequins', the default)
	// or "rendezvous".
	Assignment string
	// TimeToConverge is how long membership must stay unchanged at start
	// before the node processes its dbs. Default 10s.
	TimeToConverge time.Duration
	// ProxyTimeout caps a proxied lookup. Default 100ms.
	ProxyTimeout time.Duration
	// ProxyStageTimeout is how long a proxied attempt runs alone before a
	// backup attempt starts on the next replica. Default 0:
	// ProxyTimeout / Replication.
	ProxyStageTimeout time.Duration
	// VersionRemoveTimeout is how long a replaced version stays open and
	// advertised for peers naming it after the last request for it; each
	// request restarts the wait. Default 10m.
	VersionRemoveTimeout time.Duration
	// View is the cluster state as this node sees it. Required when
	// Enabled; edge.KVClusterView implements it over kvwatch.
	View ClusterView
}

// DefaultClusterConfig returns the defaults stated on each field.
func DefaultClusterConfig() ClusterConfig {
	return ClusterConfig{
		Replication:          2,
		MinReplication:       1,
		Assignment:           assign.NameSequential,
		TimeToConverge:       10 * time.Second,
		ProxyTimeout:         100 * time.Millisecond,
		VersionRemoveTimeout: 10 * time.Minute,
	}
}

// validate fills in defaults for zero fields and checks the rest.
func (c *ClusterConfig) validate() error {
	d := DefaultClusterConfig()
	if c.Replication <= 0 {
		c.Replication = d.Replication
	}
	if c.MinReplication <= 0 {
		c.MinReplication = d.MinReplication
	}
	if c.Assignment == "" {
		c.Assignment = d.Assignment
	}
	if c.TimeToConverge <= 0 {
		c.TimeToConverge = d.TimeToConverge
	}
	if c.ProxyTimeout <= 0 {
		c.ProxyTimeout = d.ProxyTimeout
	}
	if c.ProxyStageTimeout <= 0 {
		c.ProxyStageTimeout = max(c.ProxyTimeout/time.Duration(c.Replication), time.Millisecond)
	}
	if c.VersionRemoveTimeout <= 0 {
		c.VersionRemoveTimeout = d.VersionRemoveTimeout
	}
	switch {
	case c.MaxReplication < 0:
		return fmt.Errorf("%w: sharding.max_replication %d is negative", ErrConfig, c.MaxReplication)
	case c.MinReplication > c.Replication:
		return fmt.Errorf("%w: sharding.min_replication %d exceeds replication %d", ErrConfig, c.MinReplication, c.Replication)
	}
	if _, err := assign.ByName(c.Assignment); err != nil {
		return fmt.Errorf("%w: sharding.assignment: %v", ErrConfig, err)
	}
	if c.Enabled && c.View == nil {
		return fmt.Errorf("%w: cluster mode needs a View", ErrConfig)
	}
	return nil
}
