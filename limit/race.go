//go:build race

package limit

// raceEnabled says whether the race detector is on.
const raceEnabled = true
