//go:build race

package remote_test

// raceEnabled: allocation counts are not meaningful under -race.
const raceEnabled = true
