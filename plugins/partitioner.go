package plugins

import (
	"fmt"
	"strings"

	"github.com/spangledb/spangle/plugins/partition"
)

// Partitioner maps a key to its partition among n.
//
// Implementations are safe for concurrent use. The caller retains ownership
// of key; implementations do not keep it.
type Partitioner interface {
	// Identity names the partitioner as versions record it: "sequins",
	// "hadoop", "murmur3", or "wasm:sha256:<hex>" for a plugin. Two
	// partitioners with the same identity place every key alike.
	Identity() string

	// Partition returns the key's partition in [0, n) and its alternate
	// partition, which equals p except for sequins' pathological keys
	// (lookups try both). n must be positive. A plugin fault is an error.
	Partition(key []byte, n int) (p, alt int, err error)
}

// Names of the built-in partitioners.
const (
	Sequins = "sequins"
	Hadoop  = "hadoop"
	Murmur3 = "murmur3"
)

// Builtin returns the built-in partitioner called name ("" means sequins).
// A Wasm plugin ("wasm:<path>") is not built in: open it with Open or
// OpenPartitioner.
func Builtin(name string) (Partitioner, error) {
	switch name {
	case "", Sequins:
		return sequinsPartitioner{}, nil
	case Hadoop:
		return hadoopPartitioner{}, nil
	case Murmur3:
		return murmur3Partitioner{}, nil
	}
	if strings.HasPrefix(name, wasmPrefix) {
		return nil, fmt.Errorf("%w: %q is a Wasm plugin, not a built-in partitioner (use plugins.Open)", ErrUnknownPartitioner, name)
	}
	return nil, fmt.Errorf("%w: %q (want %s, %s, %s or wasm:<module>)", ErrUnknownPartitioner, name, Sequins, Hadoop, Murmur3)
}

type sequinsPartitioner struct{}

func (sequinsPartitioner) Identity() string { return Sequins }

func (sequinsPartitioner) Partition(key []byte, n int) (int, int, error) {
	p, alt := partition.Sequins(key, n)
	return p, alt, nil
}

type hadoopPartitioner struct{}

func (hadoopPartitioner) Identity() string { return Hadoop }

func (hadoopPartitioner) Partition(key []byte, n int) (int, int, error) {
	p := partition.Hadoop(key, n)
	return p, p, nil
}

type murmur3Partitioner struct{}

func (murmur3Partitioner) Identity() string { return Murmur3 }

func (murmur3Partitioner) Partition(key []byte, n int) (int, int, error) {
	p := partition.Murmur3(key, n)
	return p, p, nil
}
