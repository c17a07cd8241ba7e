package partition

import (
	"errors"
	"fmt"
	"strings"
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

// Names of the built-in partitioners, as versions record them.
const (
	SequinsName = "sequins"
	HadoopName  = "hadoop"
	Murmur3Name = "murmur3"
)

// WasmPrefix starts the spec of a Wasm plugin ("wasm:<path>") and the
// identity of a loaded one ("wasm:sha256:<hex>").
const WasmPrefix = "wasm:"

// ErrUnknown: a partitioner name that is neither built in nor a plugin
// ("wasm:<path>"). plugins.ErrUnknownPartitioner is this error.
var ErrUnknown = errors.New("plugins: unknown partitioner")

// Builtin returns the built-in partitioner called name ("" means sequins).
// A Wasm plugin ("wasm:<path>") is not built in: open it with plugins.Open
// or plugins.OpenPartitioner. The result holds nothing and needs no Close.
func Builtin(name string) (Partitioner, error) {
	switch name {
	case "", SequinsName:
		return sequinsPartitioner{}, nil
	case HadoopName:
		return hadoopPartitioner{}, nil
	case Murmur3Name:
		return murmur3Partitioner{}, nil
	}
	if strings.HasPrefix(name, WasmPrefix) {
		return nil, fmt.Errorf("%w: %q is a Wasm plugin, not a built-in partitioner (use plugins.Open)", ErrUnknown, name)
	}
	return nil, fmt.Errorf("%w: %q (want %s, %s, %s or wasm:<module>)", ErrUnknown, name, SequinsName, HadoopName, Murmur3Name)
}

type sequinsPartitioner struct{}

func (sequinsPartitioner) Identity() string { return SequinsName }

func (sequinsPartitioner) Partition(key []byte, n int) (int, int, error) {
	p, alt := Sequins(key, n)
	return p, alt, nil
}

type hadoopPartitioner struct{}

func (hadoopPartitioner) Identity() string { return HadoopName }

func (hadoopPartitioner) Partition(key []byte, n int) (int, int, error) {
	p := Hadoop(key, n)
	return p, p, nil
}

type murmur3Partitioner struct{}

func (murmur3Partitioner) Identity() string { return Murmur3Name }

func (murmur3Partitioner) Partition(key []byte, n int) (int, int, error) {
	p := Murmur3(key, n)
	return p, p, nil
}
