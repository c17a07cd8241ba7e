package plugins

import "github.com/spangledb/spangle/plugins/partition"

// Partitioner maps a key to its partition among n. It is
// partition.Partitioner, which holds the contract: a program that needs
// only the built-ins imports plugins/partition and not the Wasm host.
type Partitioner = partition.Partitioner

// Names of the built-in partitioners.
const (
	Sequins = partition.SequinsName
	Hadoop  = partition.HadoopName
	Murmur3 = partition.Murmur3Name
)

// Builtin returns the built-in partitioner called name ("" means sequins):
// partition.Builtin. A Wasm plugin ("wasm:<path>") is not built in: open it
// with Open or OpenPartitioner.
func Builtin(name string) (Partitioner, error) {
	return partition.Builtin(name)
}
