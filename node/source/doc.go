// Package source is where versions come from.
//
// # Model
//
// A Source is a root holding <db>/<version>/<files>, as Hadoop jobs write
// it: db and version names match NamePattern (others are ignored), files
// starting with "_" or "." are not data (IsDataFile), and a version may be
// marked complete by a _SUCCESS file. Open returns the local directory
// source (a path or file:///path); package s3 reads S3-compatible buckets
// and package objstore a NATS Object Store, which spangle publish fills.
// A node takes any of them through node.Config.OpenedSource.
//
// Builds read files through Downloads: one bandwidth limit for every
// download of the node (DownloadConfig.MaxBandwidth), and a failed open or
// read retried with jittered exponential backoff, resuming at the byte
// reached — with RangeSource.OpenAt where the source has it, else by
// reading again and skipping. Files stream into the build; nothing is
// copied to local disk first.
//
// Main types: Source, RangeSource, SourceFile, Downloads.
//
// # Caveats
//
//   - The directory source refuses symlinks that resolve outside its root
//     (ErrSymlinkOutside) unless opened with followExternal, and any data
//     entry that is not a regular file (ErrNotRegular): a version fails
//     rather than being built from some of its files.
//   - Errors wrapping ErrPermanent, or fs.ErrNotExist, are not retried;
//     every other error is, until the retries since the last byte read
//     are spent.
package source
