//go:build race

package lunfs

// raceEnabled: allocation counts are not meaningful under -race.
const raceEnabled = true
