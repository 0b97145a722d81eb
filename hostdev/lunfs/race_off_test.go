//go:build !race

package lunfs

const raceEnabled = false
