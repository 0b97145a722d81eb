//go:build race

package transport_test

// raceEnabled: the race detector allocates on its own, so allocation
// counts are meaningless under it.
const raceEnabled = true
