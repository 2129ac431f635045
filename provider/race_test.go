//go:build race

package provider_test

// raceEnabled is set under the race detector, which makes Go's regexp some
// hundred times slower: the time bounds of TestRedactHostileTextIsLinear
// differ.
const raceEnabled = true
