//go:build race

package local

// raceEnabled is set under the race detector, which makes decoding tens of
// megapixels too slow for a test.
const raceEnabled = true
