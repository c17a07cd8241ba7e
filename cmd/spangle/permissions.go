package main

import (
	"fmt"
	"io"

	"github.com/spangledb/spangle"
	"github.com/spangledb/spangle/kvwatch"
)

// natsPermissions runs "spangle nats-permissions [ROLE]": for the users
// of an external NATS cluster, it prints a role's permissions as a
// nats-server configuration block (kvwatch.RolePermissions), and with
// --accounts and no role the accounts block that puts every role but the
// node in an account of its own (kvwatch.AccountsConfig): what the
// embedded server applies to its [[nats.users]] (docs/SECURITY.md gives
// the reasons). With accounts, the responder role is the nodes' second
// login, answering the clients' lookups in the clients' account; with
// --hub-domain and --regions, the hub's accounts
// (kvwatch.HubAccountsConfig), each region's leafnode login in an account
// of its own (role "region" with --region: its permissions).
func natsPermissions(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("nats-permissions", "usage: spangle nats-permissions [flags] node|operator|publisher|client|region\n       spangle nats-permissions --accounts [--hub-domain D --regions R,…] [flags] [operator|publisher|client|responder|region]", stderr)
	cluster := fs.String("cluster", "spangle", "spangle cluster name (names the buckets and subjects)")
	domain := fs.String("domain", "", "JetStream domain the buckets are reached in (none: the account's own)")
	buckets := fs.String("buckets", "", "Object Store buckets, comma-separated: those a publisher writes, a node reads")
	hubDomain := fs.String("hub-domain", "", "with regions, the hub's JetStream domain ([region] hub_domain): a node or client of a region's NATS server, an operator or publisher of the hub's (none: no regions)")
	region := fs.String("region", "", "with --hub-domain, bounds an operator to this region's pins and buckets (none: every region)")
	accounts := fs.Bool("accounts", false, "every role but the node in an account of its own: without a role, print the accounts block; with one, the permissions of its users in their account")
	regions := fs.String("regions", "", "with --accounts and --hub-domain and no role: the regions, comma-separated, whose leafnode logins get accounts of their own at the hub (the hub's accounts block)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	scope := kvwatch.Scope{
		Cluster: *cluster, Domain: *domain, ObjectBuckets: spangle.SplitList(*buckets),
		HubDomain: *hubDomain, Region: *region, Accounts: *accounts,
	}
	var block string
	var err error
	switch {
	case *accounts && fs.NArg() == 0 && *hubDomain != "":
		if *regions == "" {
			return usagef("--accounts --hub-domain prints the hub's accounts: name its regions with --regions R,…")
		}
		block, err = kvwatch.HubAccountsConfig(scope, spangle.SplitList(*regions))
	case *regions != "":
		return usagef("--regions is for the hub's accounts block: --accounts --hub-domain D --regions R,… and no role")
	case *accounts && fs.NArg() == 0:
		roles := []string{kvwatch.RoleClient, kvwatch.RoleOperator}
		if len(scope.ObjectBuckets) > 0 {
			roles = append(roles, kvwatch.RolePublisher)
		}
		block, err = kvwatch.AccountsConfig(scope, roles...)
	case fs.NArg() == 1:
		block, err = kvwatch.PermissionsConfig(fs.Arg(0), scope)
	default:
		fs.Usage()
		return usagef("nats-permissions takes a role, got %d arguments", fs.NArg())
	}
	if err != nil {
		return usagef("%v", err)
	}
	_, err = fmt.Fprint(stdout, block)
	return err
}
