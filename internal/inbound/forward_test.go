package inbound

import (
	"net/http"
	"testing"
)

// TestForwardHeadersRenamesWebhookAndSvixHeaders: every provider header
// named webhook-* or svix-* (not only the id, timestamp and signature) and
// X-Signature travels as X-Original-<name> (docs/inbound.md, "What the
// destination receives"), so none sits beside the webhook-* headers the
// forward is signed with.
func TestForwardHeadersRenamesWebhookAndSvixHeaders(t *testing.T) {
	in := http.Header{
		"Content-Type":      {"application/json"},
		"Webhook-Id":        {"msg_1"},
		"Webhook-Timestamp": {"1760000000"},
		"Webhook-Signature": {"v1,abc"},
		"Webhook-Foo":       {"foo"},
		"Svix-Id":           {"msg_1"},
		"Svix-Foo":          {"bar"},
		"X-Signature":       {"t=1,v1=00"},
		"X-Webhook-Foo":     {"kept"},
	}
	got := forwardHeaders(in)
	for _, k := range []string{"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature", "Webhook-Foo", "Svix-Id", "Svix-Foo", "X-Signature"} {
		if v, ok := got[k]; ok {
			t.Errorf("%s forwarded under its own name (%q)", k, v)
		}
		if got["X-Original-"+k] != in.Get(k) {
			t.Errorf("X-Original-%s = %q, want %q", k, got["X-Original-"+k], in.Get(k))
		}
	}
	if got["X-Webhook-Foo"] != "kept" || got["Content-Type"] != "application/json" {
		t.Errorf("other headers changed: %v", got)
	}
}

// TestForwardHeadersOneContentType: Content-Type holds one media type
// (RFC 9110 §8.3), so several Content-Type fields are forwarded as the
// first one, as net/http's Header.Get reads it, never joined with ", "
// into a value no receiver can parse.
func TestForwardHeadersOneContentType(t *testing.T) {
	in := http.Header{
		"Content-Type": {"application/json", "application/json; charset=utf-8", "text/plain"},
		"X-Custom":     {"a", "b"},
	}
	got := forwardHeaders(in)
	if got["Content-Type"] != "application/json" {
		t.Errorf("Content-Type forwarded as %q, want the first value %q", got["Content-Type"], "application/json")
	}
	if got["X-Custom"] != "a, b" {
		t.Errorf("a repeated list header forwarded as %q, want the values joined (RFC 9110 §5.3)", got["X-Custom"])
	}
}

// TestForwardHeadersDropsConnectionOptions: the fields a request's
// Connection header names are hop-by-hop (RFC 9110 §7.6.1), like
// Connection itself: none is forwarded; the others are.
func TestForwardHeadersDropsConnectionOptions(t *testing.T) {
	in := http.Header{
		"Connection":          {"keep-alive, X-Custom-01", " x-custom-02 ,,"},
		"Keep-Alive":          {"timeout=5"},
		"X-Custom-01":         {"hop"},
		"X-Custom-02":         {"hop"},
		"X-Custom-03":         {"end to end"},
		"X-Hub-Signature-256": {"sha256=00"},
	}
	got := forwardHeaders(in)
	for _, k := range []string{"Connection", "Keep-Alive", "X-Custom-01", "X-Custom-02"} {
		if v, ok := got[k]; ok {
			t.Errorf("%s forwarded (%q): it is hop-by-hop", k, v)
		}
	}
	if got["X-Custom-03"] != "end to end" || got["X-Hub-Signature-256"] != "sha256=00" {
		t.Errorf("end-to-end headers not forwarded: %v", got)
	}
}
