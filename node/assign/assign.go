package assign

import (
	"fmt"
	"slices"
)

// Func is an assignment strategy: the partitions, in increasing order,
// that member self holds among ids when a version has n partitions, each
// held by replication members. Sequential and Rendezvous are Funcs.
type Func func(ids []string, self string, n, replication int) []int

// Strategy names, as spelled in configuration.
const (
	NameSequential = "sequential"
	NameRendezvous = "rendezvous"
)

// ByName returns the strategy called name: NameSequential or
// NameRendezvous. Any other name wraps ErrUnknownStrategy.
func ByName(name string) (Func, error) {
	switch name {
	case NameSequential:
		return Sequential, nil
	case NameRendezvous:
		return Rendezvous, nil
	}
	return nil, fmt.Errorf("%w %q (want %q or %q)", ErrUnknownStrategy, name, NameSequential, NameRendezvous)
}

// members returns the sorted unique IDs of ids plus self, in a new slice.
func members(ids []string, self string) []string {
	out := make([]string, 0, len(ids)+1)
	out = append(out, ids...)
	out = append(out, self)
	slices.Sort(out)
	return slices.Compact(out)
}
