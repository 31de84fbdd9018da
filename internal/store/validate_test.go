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
		{ValidTenant, "tenant", "acme.eu:prod-1", true},
		{ValidTenant, "tenant", "a b", false},
		{ValidTenant, "tenant", "", false},
	} {
		if got := c.fn(c.in); got != c.want {
			t.Errorf("%s %q: %v, want %v", c.name, c.in, got, c.want)
		}
	}
}
