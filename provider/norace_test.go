//go:build !race

package provider_test

const raceEnabled = false
