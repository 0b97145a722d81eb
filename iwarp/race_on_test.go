//go:build race

package iwarp

// raceEnabled: the race detector is on. It makes sync.Pool drop items on
// purpose, so allocation counts are not meaningful under it.
const raceEnabled = true
