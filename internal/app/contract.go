package app

import (
	"fmt"
	"time"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/catalog"
	"github.com/herald-webhooks/herald/internal/delivery"
	"github.com/herald-webhooks/herald/internal/retry"
	"github.com/herald-webhooks/herald/internal/store"
)

// ContractDoc is the published contract (docs/contract.md),
// generated from the running configuration so it cannot drift from what the
// server does. Served at GET /contract.
type ContractDoc struct {
	Delivery      string  `json:"delivery"`
	Order         string  `json:"order"`
	Signature     string  `json:"signature"`
	ReplayWindow  string  `json:"replay_window"`
	Retries       Retries `json:"retries"`
	WhatIsRetried string  `json:"what_is_retried"`
	// CircuitBreaker says how an open circuit changes the retry schedule
	// (the schedule's delays are then lower bounds).
	CircuitBreaker string `json:"circuit_breaker"`
	Timeout        string `json:"timeout"`
	Payload        string `json:"payload"`
	// Catalog is the catalog mode in force (--catalog) and what it means.
	Catalog      string   `json:"catalog"`
	MaxPayload   int      `json:"max_payload_bytes"`
	EndpointURLs string   `json:"endpoint_urls"`
	AllowedCIDRs []string `json:"allowed_cidrs"`
}

// Retries describes the retry schedule in force.
type Retries struct {
	MaxAttempts     int      `json:"max_attempts"`
	Schedule        string   `json:"schedule" doc:"the --retry-schedule value in force"`
	DelayUpperBound []string `json:"delay_upper_bounds" doc:"d before attempts 2..N; the wait is uniform in [d/2, d]"`
	Jitter          string   `json:"jitter"`
	WorstCase       string   `json:"worst_case_total"`
}

// Contract returns the contract of a configuration.
func Contract(cfg Config) ContractDoc {
	cfg = cfg.WithDefaults()
	sched := cfg.RetrySchedule
	bounds := make([]string, len(sched))
	var total time.Duration
	for i, d := range sched {
		bounds[i] = d.String()
		total += d
	}
	// The schemes and the ranges refused say what this node's settings
	// allow, never one thing and its opposite ("http allowed. https only").
	scheme, ranges := "https only", "private, loopback, link-local, unspecified, CGNAT, multicast and metadata ranges"
	switch {
	case cfg.Dev:
		scheme = "DEV MODE: https or http; loopback destinations allowed"
		ranges = "private, link-local, unspecified, CGNAT, multicast and metadata ranges (loopback allowed in dev mode)"
	case cfg.AllowHTTP:
		scheme = "https or http (http allowed by the operator: --allow-http)"
	}
	urls := scheme + "; no userinfo, fragment, backslash, whitespace or control characters; every dialed IP checked against " + ranges + "; " +
		"link-local and cloud-metadata addresses (169.254.0.0/16, fe80::/10, fd00:ec2::254, 100.100.100.200, …) are refused for inbound sources' destinations too, in dev mode and through a wider allowed range (only an allowed range inside them opens them); " +
		"IPv6 addresses that carry an IPv4 address are also judged by the IPv4 address they embed, whatever range allows them: IPv4-mapped (::ffff:0:0/96), NAT64 (64:ff9b::/96, RFC 6052, and the local-use 64:ff9b:1::/48, RFC 8215, its last 32 bits read as in a /96 translation prefix) and 6to4 (2002::/16, RFC 3056, bits 16..47); " +
		"redirects never followed; environment proxies ignored"
	cidrs := make([]string, 0, len(cfg.AllowCIDRs))
	for _, p := range cfg.AllowCIDRs {
		cidrs = append(cidrs, p.String())
	}
	engine := delivery.Config{BreakerThreshold: cfg.BreakerThreshold, BreakerCooldown: cfg.BreakerCooldown}.WithDefaults()
	threshold, cooldown := engine.BreakerThreshold, engine.BreakerCooldown
	breaker := fmt.Sprintf("after %d consecutive failed attempts to an endpoint without an answer or with a 5xx, its circuit opens for %s: "+
		"its due deliveries wait without consuming attempts, then one probe is sent; a failed probe re-opens the circuit for another %s. "+
		"The schedule's delays are then lower bounds: an endpoint that stays down gets about one attempt per %s across all its deliveries, "+
		"so a delivery's attempts may be spread over much longer than the worst case above (with %s between attempts at least, once the circuit has opened)",
		threshold, cooldown, cooldown, cooldown, cooldown)
	catalogMode := "permissive: uncatalogued event types are published as they are; catalogued types are validated against their version's JSON Schema"
	if cfg.Catalog == "strict" {
		catalogMode = "strict: only catalogued event types are published (others answer 422); data is validated against its version's JSON Schema"
	}
	var guard string
	switch cfg.PersonalData {
	case "", "auto":
		guard = "personal data (e-mail, phone, payment card, IBAN) outside properties marked x-herald-personal-data is refused (422) for catalogued types and warned about (X-Herald-Personal-Data-Warning) for uncatalogued ones"
	case "refuse":
		guard = "personal data (e-mail, phone, payment card, IBAN) outside properties marked x-herald-personal-data is refused (422) for every type"
	case "warn":
		guard = "personal data (e-mail, phone, payment card, IBAN) outside properties marked x-herald-personal-data is published with a warning (X-Herald-Personal-Data-Warning); it may reach receivers"
	case "off":
		guard = "personal data is NOT checked in published events by this server (--personal-data off): payloads may carry it; catalog examples are still checked (422 when one carries unmarked personal data), since the catalog and /openapi.json show them to every reader"
	}
	if cfg.PersonalData != "off" {
		guard += "; " + catalog.EmailDomainRule + "; " + catalog.HiddenEmailReadings
	}
	signature := "X-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 over \"<t>.<raw body>\" keyed by the secret string>; Standard Webhooks webhook-id, webhook-timestamp, webhook-signature: v1,<base64 HMAC-SHA256 over \"<id>.<t>.<raw body>\" keyed by base64-decoded secret after whsec_>; one signature per active secret during a rotation" +
		fmt.Sprintf(" (at most %d secrets sign at once: a rotation beyond that drops the oldest, even before its overlap ends)", store.MaxSecrets)
	return ContractDoc{
		Catalog:        catalogMode,
		CircuitBreaker: breaker,
		Delivery:       "at least once; duplicates happen; the event id (X-Event-Id, webhook-id) is the idempotency key",
		Order:          api.OrderText(nil),
		Signature:      signature,
		ReplayWindow:   "receivers reject |now - t| > 300 s",
		Retries: Retries{
			MaxAttempts:     len(sched) + 1,
			Schedule:        retry.FormatSchedule(sched),
			DelayUpperBound: bounds,
			Jitter:          "equal jitter: uniform in [d/2, d]",
			WorstCase:       total.String(),
		},
		WhatIsRetried: "network errors (except blocked by the egress policy: dead letter at once), timeouts, 5xx, 408, 429 (Retry-After honoured, capped at 24h); other 4xx and 3xx (never followed): at most 2 retries; 410 Gone: dead letter at once and the endpoint is disabled",
		Timeout:       (cfg.AttemptTimeout).String() + " per attempt (connect, TLS, headers, body); response bodies read up to 64 KiB, 4 KiB excerpt stored",
		Payload:       "thin: ids, type, version, links; " + guard,
		MaxPayload:    cfg.MaxPayloadBytes,
		EndpointURLs:  urls,
		AllowedCIDRs:  cidrs,
	}
}
