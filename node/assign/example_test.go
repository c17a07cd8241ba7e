package assign_test

import (
	"fmt"

	"github.com/spangledb/spangle/node/assign"
)

// Sequins' assignment of 5 partitions, replication 2, over shard IDs 1-3.
func ExampleSequential() {
	for _, self := range []string{"1", "2", "3"} {
		fmt.Println(self, assign.Sequential([]string{"1", "2", "3"}, self, 5, 2))
	}
	// Output:
	// 1 [0 1 3 4]
	// 2 [0 2 3]
	// 3 [1 2 4]
}

// The two owners of partition 0, and the node that heals it once one of
// them is gone.
func ExampleOwners() {
	ids := []string{"node-a", "node-b", "node-c", "node-d", "node-e"}
	fmt.Println(assign.Owners(ids, 0, 2))
	fmt.Println(assign.Order(ids, 0)[2])
	// Output:
	// [node-e node-d]
	// node-b
}
