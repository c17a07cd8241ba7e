package spangle

// clusterFile is [cluster]: what the nodes of a cluster cost each other
// beyond lookups (issue 35: peers copy built partition files instead of
// building them from the source). Cluster mode itself is [sharding]'s.
type clusterFile struct {
	// PeerCopyBandwidth bounds the bytes per second of partition files
	// this node sends to peers copying them, all copies together.
	PeerCopyBandwidth size `toml:"peer_copy_bandwidth"`
	// PeerCopyConcurrency bounds the partition files sent at once.
	PeerCopyConcurrency int `toml:"peer_copy_concurrency"`
	// BuildOnce: one node builds each new version, the others copy it
	// (default true); false: every node builds its own partitions.
	BuildOnce *bool `toml:"build_once"`
	// BuildOnceWait bounds the wait for the builder, or a busy peer,
	// before building from the source.
	BuildOnceWait duration `toml:"build_once_wait"`
	// BuildOnceMinSize: smaller versions are built by every node.
	BuildOnceMinSize size `toml:"build_once_min_size"`
}

func (f clusterFile) apply(cfg *Config) error {
	setNonZero(&cfg.HTTP.PeerCopyConcurrency, f.PeerCopyConcurrency)
	setDuration(&cfg.Cluster.BuildOnceWait, f.BuildOnceWait)
	if f.BuildOnce != nil {
		cfg.Cluster.DisableBuildOnce = !*f.BuildOnce
	}
	return parseSizes(sizeKey{"cluster.peer_copy_bandwidth", f.PeerCopyBandwidth, &cfg.HTTP.PeerCopyBandwidth},
		sizeKey{"cluster.build_once_min_size", f.BuildOnceMinSize, &cfg.Cluster.BuildOnceMinBytes})
}
