package store

import (
	"strings"
	"testing"
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
