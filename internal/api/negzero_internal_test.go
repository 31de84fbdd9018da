package api

import "testing"

// TestHoldsNegativeZero: the cheap test before negativeZero's walk finds
// the number -0 wherever JSON may hold it, and passes over the "-0" of
// text (timestamps, ids) and of other numbers, so a publish's body with
// such text is not walked twice.
func TestHoldsNegativeZero(t *testing.T) {
	for body, want := range map[string]bool{
		`{"tolerance_seconds":-0}`: true,
		`{"a": -0 }`:               true,
		`{"a":[1,-0]}`:             true,
		"{\"a\":\n\t-0}":           true,
		`{"a":-0,"b":1}`:           true,
		`{"occurred_at":"2026-01-01T00:00:00-05:00"}`: false,
		`{"id":"ord-0001"}`:                           false,
		`{"a":-0.5}`:                                  false,
		`{"a":-0e1}`:                                  false,
		`{"a":-01}`:                                   false,
		`{"a":"x-0"}`:                                 false,
		`{"a":1}`:                                     false,
	} {
		if got := holdsNegativeZero([]byte(body)); got != want {
			t.Errorf("holdsNegativeZero(%s) = %v, want %v", body, got, want)
		}
	}
}
