//go:build !race

package delivery

// raceEnabled: see race_on_test.go.
const raceEnabled = false
