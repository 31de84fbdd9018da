package inbound

import "testing"

// TestSanitizeType: a provider's type keeps Herald's type alphabet; a run
// of other bytes becomes one _ between two kept ones (never at an edge or
// beside a dot), so distinct provider types stay distinct.
func TestSanitizeType(t *testing.T) {
	for in, want := range map[string]string{
		"invoice.paid":          "invoice.paid",
		"push\tx y":             "push_x_y",
		"pushxy":                "pushxy",
		"orders/create":         "orders.create",
		"caf\u00e9.\u2603":      "caf",
		"  spaced  ":            "spaced",
		"a..b//c":               "a.b.c",
		"\u00e9t\u00e9 d\u00e9": "t_d",
		"":                      "",
	} {
		if got := sanitizeType(in); got != want {
			t.Errorf("sanitizeType(%q) = %q, want %q", in, got, want)
		}
	}
}
