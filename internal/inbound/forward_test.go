package inbound

import (
	"net/http"
	"strings"
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

// TestForwardHeadersRenamedHeaderWins: a provider header literally named
// like a renamed one (X-Original-X-Signature, X-Original-Webhook-Id) is
// dropped, so X-Original-<name> is always the provider's <name>
// (docs/inbound.md, "What the destination receives").
func TestForwardHeadersRenamedHeaderWins(t *testing.T) {
	in := http.Header{
		"X-Signature":            {"t=1,v1=real"},
		"X-Original-X-Signature": {"t=1,v1=forged"},
		"Webhook-Id":             {"msg_real"},
		"X-Original-Webhook-Id":  {"msg_forged"},
		"X-Original-Svix-Foo":    {"forged, no Svix-Foo sent"},
		"X-Original-Other":       {"kept"},
	}
	got := forwardHeaders(in)
	if got["X-Original-X-Signature"] != "t=1,v1=real" || got["X-Original-Webhook-Id"] != "msg_real" {
		t.Errorf("X-Original-X-Signature = %q, X-Original-Webhook-Id = %q; want the provider's X-Signature and Webhook-Id",
			got["X-Original-X-Signature"], got["X-Original-Webhook-Id"])
	}
	if v, ok := got["X-Original-Svix-Foo"]; ok {
		t.Errorf("X-Original-Svix-Foo forwarded (%q): the name is a renamed header's", v)
	}
	if got["X-Original-Other"] != "kept" {
		t.Errorf("X-Original-Other = %q, want it kept (no header of Herald's is renamed to it)", got["X-Original-Other"])
	}
}

// TestForwardHeadersDropsUnderscoreSpellingsOfReservedNames: receivers
// that map headers to HTTP_* variables (CGI, PHP, Rack, WSGI) read
// X_Event_Id and X-Event-Id as the same variable, so a provider header
// that, with "_" read as "-", is one Herald drops, sets or renames is
// dropped; other underscore headers are forwarded as they are.
func TestForwardHeadersDropsUnderscoreSpellingsOfReservedNames(t *testing.T) {
	in := http.Header{ // as net/http's server hands them over (canonical keys)
		"X_event_id":             {"evt_smuggled"},
		"X_event-Type":           {"smuggled"},
		"X_delivery_attempt":     {"9"},
		"Webhook_id":             {"evt_smuggled"},
		"Webhook_signature":      {"v1,smuggled"},
		"Svix_id":                {"msg_smuggled"},
		"X_signature":            {"t=1,v1=smuggled"},
		"X_original_x_signature": {"t=1,v1=smuggled"},
		"X-Original_webhook-Id":  {"msg_smuggled"},
		"Content_length":         {"5"},
		"Transfer_encoding":      {"chunked"},
		"X_forwarded_for":        {"203.0.113.9"},
		"Proxy_authorization":    {"Basic x"},
		"X_real_ip":              {"203.0.113.9"},
		"User_agent":             {"smuggled"},
		"X_custom_01":            {"hop"},
		"Connection":             {"X-Custom-01"},
		"X-Signature":            {"t=1,v1=real"},
		"Webhook-Id":             {"msg_real"},
		"X_shop_domain":          {"shop.example"},
		"X_request_id":           {"req_1"},
	}
	got := forwardHeaders(in)
	for k := range in {
		if strings.Contains(k, "_") && k != "X_shop_domain" && k != "X_request_id" {
			if v, ok := got[k]; ok {
				t.Errorf("%s forwarded (%q): receivers read it as Herald's own header", k, v)
			}
		}
	}
	if got["X_shop_domain"] != "shop.example" || got["X_request_id"] != "req_1" {
		t.Errorf("ordinary underscore headers not forwarded: %v", got)
	}
	if got["X-Original-X-Signature"] != "t=1,v1=real" || got["X-Original-Webhook-Id"] != "msg_real" {
		t.Errorf("renamed headers: %v", got)
	}
}
