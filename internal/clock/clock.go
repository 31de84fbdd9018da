// Package clock is where Herald's scheduling reads the time and makes its
// timers: the delivery engine (due times, the poll interval, the rescuer,
// cluster heartbeats, fan-out continuation), the housekeeping of
// operational events and retention (internal/ops), the API, the inbound
// gateway and the store gauges' cache all take one Clock from
// app.Config.Clock.
//
// The types are those of github.com/jonboulle/clockwork: System is its
// real clock with Now in UTC, Fake its fake clock, whose timers and
// tickers fire only when a test moves the time (Advance) and which tells
// a test when a given number of timers wait on it (BlockUntilContext), so
// a test of a schedule runs in no wall time and without racing the code
// it tests.
package clock

import (
	"time"

	"github.com/jonboulle/clockwork"
)

// Clock tells the time and makes timers and tickers.
type Clock = clockwork.Clock

// Timer is a Clock's timer: Chan delivers the time once it fires; Stop and
// Reset behave as time.Timer's.
type Timer = clockwork.Timer

// Ticker is a Clock's ticker: Chan delivers the time every period.
type Ticker = clockwork.Ticker

// Fake is a clock for tests: its time moves only by Advance, which fires
// the timers and tickers it passes, in the order of their expiry.
// BlockUntilContext(ctx, n) returns once n timers and tickers wait on it.
type Fake = clockwork.FakeClock

// System returns the wall clock; its Now is time.Now().UTC() (Herald
// stores and compares times in UTC), its timers and tickers the time
// package's.
func System() Clock { return system{clockwork.NewRealClock()} }

type system struct{ clockwork.Clock }

// Now returns time.Now().UTC().
func (system) Now() time.Time { return time.Now().UTC() }

// NewFake returns a fake clock at t.
func NewFake(t time.Time) *Fake { return clockwork.NewFakeClockAt(t) }
