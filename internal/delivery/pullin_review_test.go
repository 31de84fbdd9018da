package delivery

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// The pull-in of a schedule's rest (pullRest) spaces its deliveries from
// the current schedule's end (m.at = deferrals.next) but reads them from
// rest.from, the end of the previous pull-in: the claims turned away at the
// cap since then are due in [rest.from, m.at) and would be moved to m.at or
// later.
func TestRestPullInNeverMovesLater(t *testing.T) {
	g := backlogScheduler()
	claim := newClaims(g)
	var grants []*grant
	// Slow start: two attempts at t0, the backlog turned away 4 s later
	// (spaced by the oldest attempt's age, 4 s / 16).
	for range 2 {
		d := claim(t0)
		if d.verdict != run {
			t.Fatalf("verdict %d", d.verdict)
		}
		grants = append(grants, d.grant)
	}
	for range 3000 {
		if d := claim(t0.Add(4 * time.Second)); d.verdict != deferred {
			t.Fatalf("verdict %d", d.verdict)
		}
	}
	now := t0.Add(5 * time.Second)
	for _, gr := range grants {
		if f := g.release(gr, outcome{took: 5 * time.Second}, now, false); f.pullIn != nil {
			t.Fatal("pull-in on the slow answers")
		}
	}
	// Fast answers until the chain's pull-in; it takes pullInMax.
	var m *backlogMove
	for m == nil {
		d := claim(now)
		if d.verdict != run {
			t.Fatalf("verdict %d", d.verdict)
		}
		now = now.Add(100 * time.Millisecond)
		m = g.release(d.grant, outcome{took: 100 * time.Millisecond}, now, false).pullIn
	}
	t.Logf("chain pull-in: [%v, %v] at %v spacing %v", m.dueFrom.Sub(t0), m.dueTo.Sub(t0), m.at.Sub(t0), m.spacing)
	// Fill the cap; claims turned away meanwhile (before the move is
	// written, and after it) are deferred.
	grants = grants[:0]
	var turned []time.Time
	for range 200 {
		switch d := claim(now); d.verdict {
		case run:
			grants = append(grants, d.grant)
		case deferred:
			turned = append(turned, d.at)
		}
	}
	g.pulledIn(*m, pullInMax) // the move is written: it took all it could
	for range 20 {
		if d := claim(now); d.verdict == deferred {
			turned = append(turned, d.at)
		}
	}
	now = now.Add(time.Millisecond)
	rest := g.release(grants[0], outcome{took: 100 * time.Millisecond}, now, false).pullIn
	if rest == nil {
		t.Fatal("no pull-in of the rest")
	}
	t.Logf("rest pull-in: [%v, %v] at %v", rest.dueFrom.Sub(t0), rest.dueTo.Sub(t0), rest.at.Sub(t0))
	later := 0
	for _, at := range turned {
		if !at.Before(rest.dueFrom) && at.Before(rest.at) {
			later++ // in the window, due before the move's first slot
		}
	}
	if later > 0 {
		t.Errorf("%d of the %d claims turned away since the first pull-in are due in [%v, %v), within the rest's window but before its first slot: the move makes them later",
			later, len(turned), rest.dueFrom.Sub(t0), rest.at.Sub(t0))
	}
}

// With a spacing of 0 (an endpoint answering in about 100 µs at a fast cap
// of 128: 781 ns a slot, truncated to whole microseconds), a pull-in of a
// schedule's rest that took pullInMax leaves rest.from = m.at, where it put
// all of them: the next release's pull-in reads them again and moves them
// to the then-current schedule end, and so on at each release, while the
// rest of the schedule is never reached.
func TestRestPullInSpacingZero(t *testing.T) {
	g := backlogScheduler()
	claim := newClaims(g)
	// The store: the backlog's due times (never attempted), moved as
	// MoveEndpointDeliveries does.
	rows := map[int]time.Time{}
	moves := map[int]int{}
	later := 0
	move := func(m *backlogMove) int {
		var in []int
		for i, d := range rows {
			if !d.Before(m.dueFrom) && !d.After(m.dueTo) {
				in = append(in, i)
			}
		}
		slices.SortFunc(in, func(a, b int) int {
			if c := rows[a].Compare(rows[b]); c != 0 {
				return c
			}
			return a - b
		})
		in = in[:min(len(in), pullInMax)]
		for k, i := range in {
			to := m.at.Add(time.Duration(k) * m.spacing.Truncate(time.Microsecond))
			if to.After(rows[i]) {
				later++
			}
			rows[i] = to
			moves[i]++
		}
		g.pulledIn(*m, len(in))
		return len(in)
	}
	var gs []*grant
	for range 2 {
		gs = append(gs, claim(t0).grant)
	}
	for i := range 20000 {
		d := claim(t0.Add(2 * time.Second))
		rows[i+3] = d.at // ids 1 and 2 ran
	}
	now := t0.Add(2 * time.Second)
	for _, gr := range gs {
		g.release(gr, outcome{took: 2 * time.Second}, now, false)
	}
	pullIns, zero := 0, 0
	for range 60 { // fast answers, one at a time
		d := claim(now)
		now = now.Add(100 * time.Microsecond)
		if m := g.release(d.grant, outcome{took: 100 * time.Microsecond}, now, false).pullIn; m != nil {
			pullIns++
			move(m)
		}
	}
	// The endpoint at its fast cap, claims turned away: the schedule
	// reaches a few ms ahead.
	gs = gs[:0]
	for range 200 {
		if d := claim(now); d.verdict == run {
			gs = append(gs, d.grant)
		}
	}
	t.Logf("e.avg %v, spacing %v, schedule %v ahead, rest %+v", g.eps["ep"].avg, g.eps["ep"].avg/128, g.eps["ep"].deferrals.next.Sub(now), g.eps["ep"].pullRest.to.Sub(t0))
	for _, gr := range gs {
		now = now.Add(time.Microsecond)
		if m := g.release(gr, outcome{took: 100 * time.Microsecond}, now, false).pullIn; m != nil {
			pullIns++
			if m.spacing.Truncate(time.Microsecond) == 0 {
				zero++
			}
			move(m)
		}
	}
	most := 0
	for _, n := range moves {
		most = max(most, n)
	}
	t.Logf("%d pull-ins (%d with a spacing of 0), a delivery moved up to %d times, %d moves made one later", pullIns, zero, most, later)
	if most > 3 {
		t.Errorf("a delivery was pulled in %d times (%d pull-ins for %d deliveries)", most, pullIns, len(rows))
	}
}

// newClaims returns a function deciding on g a new claim of endpoint "ep"
// of tenant "a" at now (ids 1, 2, …).
func newClaims(g *scheduler) func(now time.Time) decision {
	id := 0
	return func(now time.Time) decision {
		id++
		return g.decide(claimOf(fmt.Sprint(id), "ep", "a", "https://ep.example/", 0), now)
	}
}
