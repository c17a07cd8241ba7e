package main

import (
	"fmt"
	"io"

	"github.com/spangledb/spangle"
	"github.com/spangledb/spangle/kvwatch"
)

// natsPermissions runs "spangle nats-permissions ROLE": it prints a
// role's permissions as a nats-server configuration block, for the users
// of an external NATS cluster: the lists the embedded server applies
// (kvwatch.RolePermissions; docs/SECURITY.md gives the reasons).
func natsPermissions(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("nats-permissions", "usage: spangle nats-permissions [flags] node|operator|publisher|client", stderr)
	cluster := fs.String("cluster", "spangle", "spangle cluster name (names the buckets and subjects)")
	domain := fs.String("domain", "", "JetStream domain the buckets are reached in (none: the account's own)")
	buckets := fs.String("buckets", "", "Object Store buckets, comma-separated: those a publisher writes, a node reads")
	hubDomain := fs.String("hub-domain", "", "with regions, the hub's JetStream domain ([region] hub_domain): a node or client of a region's NATS server, an operator or publisher of the hub's (none: no regions)")
	region := fs.String("region", "", "with --hub-domain, bounds an operator to this region's pins and buckets (none: every region)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return usagef("nats-permissions takes a role, got %d arguments", fs.NArg())
	}
	block, err := kvwatch.PermissionsConfig(fs.Arg(0), kvwatch.Scope{
		Cluster: *cluster, Domain: *domain, ObjectBuckets: spangle.SplitList(*buckets),
		HubDomain: *hubDomain, Region: *region,
	})
	if err != nil {
		return usagef("%v", err)
	}
	_, err = fmt.Fprint(stdout, block)
	return err
}
