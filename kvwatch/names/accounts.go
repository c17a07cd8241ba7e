package names

// ImportedAPI is the prefix under which a publisher's or an operator's
// NATS account sees the cluster account's JetStream API ("$JS.API"):
// those accounts have no JetStream of their own, and import exactly the
// API requests their role needs as services, renamed so that they do not
// meet nats-server's own "$JS.API.>" of the importing account (which
// answers "JetStream not enabled"). A client's direct gets keep their
// names: nats-server lets them through (docs/SECURITY.md).
const ImportedAPI = "JS.spangle.API"

// ClusterAccount returns the name of the NATS account that holds a
// cluster's JetStream (its buckets and Object Store buckets), its nodes'
// logins, and the lookup subjects they answer.
func ClusterAccount(cluster string) string { return "spangle_" + cluster }

// RoleAccount returns the name of the NATS account of a role's logins
// (client, operator, publisher) of a cluster; suffix, when not "",
// tells apart accounts of one role with different imports (a
// publisher's buckets, an operator's region).
func RoleAccount(cluster, role, suffix string) string {
	n := "spangle_" + cluster + "_" + role
	if suffix != "" {
		n += "_" + suffix
	}
	return n
}

// RegionAccount returns the name of the NATS account, at the hub, of
// region's leafnode login (kvwatch.HubAccountsConfig).
func RegionAccount(cluster, region string) string { return "spangle_" + cluster + "_region_" + region }
