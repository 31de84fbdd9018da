package store

// The shapes of names the API and the outbox accept: one definition, so
// POST /v1/events and outbox.Publish can never disagree.

// ValidTenant reports whether s is a tenant key: 1–128 letters, digits,
// '_', '.', ':' or '-'.
func ValidTenant(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

// ValidEventType reports whether t is an event type: at most 128 bytes of
// segments of letters, digits, '_' or '-' joined by single dots
// ("file.extraction.completed").
func ValidEventType(t string) bool {
	if t == "" || len(t) > 128 {
		return false
	}
	seg := 0
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-':
			seg++
		case c == '.':
			if seg == 0 {
				return false
			}
			seg = 0
		default:
			return false
		}
	}
	return seg > 0
}

// ValidEventID reports whether s may be a producer-chosen event id: 1–128
// letters, digits, '_', '-' or ':'. No dots: the Standard Webhooks
// signature covers "<id>.<t>.<body>" (standard-webhooks.md, "Signature
// scheme").
func ValidEventID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == ':') {
			return false
		}
	}
	return true
}
