package store

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func TestValidators(t *testing.T) {
	for _, c := range []struct {
		fn   func(string) bool
		name string
		in   string
		want bool
	}{
		{ValidEventType, "type", "file.extraction.completed", true},
		{ValidEventType, "type", "a", true},
		{ValidEventType, "type", "", false},
		{ValidEventType, "type", "a..b", false},
		{ValidEventType, "type", ".a", false},
		{ValidEventType, "type", "a.", false},
		{ValidEventType, "type", "a b", false},
		{ValidEventType, "type", strings.Repeat("a", 129), false},
		{ValidEventID, "id", "order-42:x_y", true},
		{ValidEventID, "id", "evt.1", false},
		{ValidEventID, "id", "", false},
		{ValidEventID, "id", "é", false},
		{ValidEventID, "id", strings.Repeat("a", 129), false},
		{HeraldEventID, "herald id", "evt_op_x", true},
		{HeraldEventID, "herald id", "EVT_OP_x", true},
		{HeraldEventID, "herald id", "Evt_op_x", true},
		{HeraldEventID, "herald id", "evt_06h4kfnxjhypvf17c40098w9ww", true},
		{HeraldEventID, "herald id", "EVT_06H4KFNXJHYPVF17C40098W9WW", true},
		{HeraldEventID, "herald id", "evt_test_06h4kfnxjhypvf17c40098w9ww", true}, // a test event's: NewID("evt_test")
		{HeraldEventID, "herald id", "EVT_TEST_06H4KFNXJHYPVF17C40098W9WW", true},
		{HeraldEventID, "herald id", "evt_test_order-1", false},
		{HeraldEventID, "herald id", "evt_short", false},
		{HeraldEventID, "herald id", "EVT", false},
		{HeraldEventID, "herald id", "inv-1", false},
		{ValidTenant, "tenant", "acme.eu:prod-1", true},
		{ValidTenant, "tenant", "a b", false},
		{ValidTenant, "tenant", "", false},
	} {
		if got := c.fn(c.in); got != c.want {
			t.Errorf("%s %q: %v, want %v", c.name, c.in, got, c.want)
		}
	}
}

// TestShownOccurredAt: an instant ValidOccurredAt accepts is shown as it
// is (in UTC), any other as the nearer bound, which ValidOccurredAt
// accepts and encoding/json can encode.
func TestShownOccurredAt(t *testing.T) {
	in := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.FixedZone("x", 3600))
	for _, c := range []struct {
		in, want time.Time
	}{
		{in, in.UTC()},
		{MinOccurredAt, MinOccurredAt},
		{MaxOccurredAt, MaxOccurredAt},
		{MinOccurredAt.Add(-time.Microsecond), MinOccurredAt},
		{MaxOccurredAt.Add(time.Microsecond), MaxOccurredAt},
		{time.UnixMicro(math.MinInt64), MinOccurredAt},
		{time.UnixMicro(math.MaxInt64), MaxOccurredAt},
	} {
		got := ShownOccurredAt(c.in)
		if !got.Equal(c.want) || got.Location() != time.UTC {
			t.Errorf("ShownOccurredAt(%v) = %v, want %v in UTC", c.in, got, c.want)
		}
		if !ValidOccurredAt(got) {
			t.Errorf("ShownOccurredAt(%v) = %v, which ValidOccurredAt refuses", c.in, got)
		}
		if _, err := json.Marshal(got); err != nil {
			t.Errorf("ShownOccurredAt(%v) = %v does not encode: %v", c.in, got, err)
		}
	}
}
