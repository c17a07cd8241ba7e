//go:build !unix

package client_test

import "time"

// processCPU is 0 where getrusage is missing: the benchmarks' CPU
// figures are then 0 (or NaN as ratios).
func processCPU() time.Duration { return 0 }
