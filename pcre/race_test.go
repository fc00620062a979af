//go:build race

package pcre

const raceEnabled = true
