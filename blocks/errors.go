package blocks

import (
	"errors"
	"fmt"
)

var (
	// ErrNotFound: the key is not in the partition.
	ErrNotFound = errors.New("blocks: key not found")
	// ErrPartitionNotHeld: the version does not hold the partition on this
	// node.
	ErrPartitionNotHeld = errors.New("blocks: partition not held")
	// ErrClosed: the Version or Store was closed.
	ErrClosed = errors.New("blocks: closed")
	// ErrLocked: another process holds the data dir's lock.
	ErrLocked = errors.New("blocks: data dir locked by another process")
	// ErrExists: Build was asked for a version already complete on disk
	// (Open it instead).
	ErrExists = errors.New("blocks: version already built")
	// ErrBuilding: the version is being built by another call right now.
	ErrBuilding = errors.New("blocks: version is being built")
	// ErrNoVersion: no complete version of that name is on disk.
	ErrNoVersion = errors.New("blocks: no such version")
	// ErrInvalidName: a db or version name does not match ^[-_a-zA-Z0-9]+$.
	ErrInvalidName = errors.New("blocks: invalid name")
	// ErrInvalidSpec: a BuildSpec or Options field is out of range.
	ErrInvalidSpec = errors.New("blocks: invalid build spec")
	// ErrBadInput: a record that cannot be stored (empty or oversized key),
	// a partitioner result out of range, or presharded input that is not
	// (see MisplacedKeyError). Corrupt SequenceFiles are reported with the
	// seqfile package's *seqfile.Error instead.
	ErrBadInput = errors.New("blocks: bad input")
	// ErrTooLarge: the value is larger than GetLimit's limit; found
	// before the value is copied or decoded.
	ErrTooLarge = errors.New("blocks: value larger than the limit")
	// ErrCorrupt: a stored partition or manifest is not what blocks wrote.
	ErrCorrupt = errors.New("blocks: corrupt store")
	// ErrNoSpace: a build ran out of disk space (ENOSPC); its partial
	// files are removed.
	ErrNoSpace = errors.New("blocks: no space left on the data dir's disk")
)

// MisplacedKeyError reports a key of a presharded file that belongs to
// another partition than the file's. errors.Is(err, ErrBadInput) is true.
type MisplacedKeyError struct {
	File          string // source file name
	Record        int64  // index of the record in the file, from 0
	Offset        int64  // byte offset of the record in the file
	Key           []byte
	Partition     int // the key's partition
	Alternate     int // the key's alternate partition
	FilePartition int // the partition the file holds (that of its first record)
}

func (e *MisplacedKeyError) Error() string {
	return fmt.Sprintf("blocks: presharded file %s: record %d at offset %d: key %q belongs to partition %d (alternate %d), but the file holds partition %d",
		e.File, e.Record, e.Offset, truncateKey(e.Key), e.Partition, e.Alternate, e.FilePartition)
}

// Is makes errors.Is(err, ErrBadInput) true.
func (e *MisplacedKeyError) Is(target error) bool { return target == ErrBadInput }

// truncateKey shortens a key for an error message.
func truncateKey(k []byte) []byte {
	const max = 64
	if len(k) > max {
		return k[:max]
	}
	return k
}
