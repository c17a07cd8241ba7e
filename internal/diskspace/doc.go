// Package diskspace owns the free-disk rule: the bytes free to this
// process on the file system holding a directory (statfs's available
// blocks, not the free ones, which count the blocks reserved for root).
// blocks checks a build against it, kvwatch the embedded NATS server's
// store before a restart. A leaf.
//
// # Caveats
//
//   - On platforms without statfs (not unix) Free returns
//     errors.ErrUnsupported; callers then go on without the check.
package diskspace
