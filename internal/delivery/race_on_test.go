//go:build race

package delivery

// raceEnabled: the test binary runs with the race detector, under which
// sync.Pool drops a random share of what is put in it, so allocation
// counts move from run to run.
const raceEnabled = true
