//go:build race

package compress

// raceEnabled: the race detector changes what allocates; TestEncodeAllocs skips.
const raceEnabled = true
