package assign

// MaxReplicationFilter is sequins' max_replication rule, applied when a
// node creates a version: of the partitions assigned to it, it keeps those
// that have fewer than maxReplication replicas on other nodes, as
// remoteReplicas reports them, and drops the rest. The rule is off, and
// assigned is returned whole, when maxReplication < replication (sequins'
// default max_replication is 0). remoteReplicas is called once per
// assigned partition, only when the rule is on.
//
// assigned is not modified or retained; the result is a new slice (nil
// when nothing is kept), in the order of assigned.
func MaxReplicationFilter(assigned []int, remoteReplicas func(p int) int, replication, maxReplication int) []int {
	var out []int
	for _, p := range assigned {
		if maxReplication < replication || remoteReplicas(p) < maxReplication {
			out = append(out, p)
		}
	}
	return out
}
