//go:build race

package blocks

// raceEnabled: the race detector's shadow memory makes RSS meaningless.
const raceEnabled = true
