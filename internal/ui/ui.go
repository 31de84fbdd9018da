// Package ui serves Herald's web UI at /ui/: one static page over the HTTP
// API v1 (endpoints with their state and dead-letter counts; pause, resume,
// enable; an endpoint's deliveries and attempts; replay of one dead letter
// or of an endpoint's whole dead-letter queue with one button). The page
// holds no data of its own: it asks for the API key and calls the API with
// it, so the UI has exactly the API's permissions.
package ui

import (
	_ "embed"
	"net/http"
)

//go:embed index.html
var page []byte

// Handler serves the page.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// /ui/portal is where portal sessions' URLs point
		// (/ui/portal#token=…): the same page, signed in by the token.
		if r.URL.Path != "/ui/" && r.URL.Path != "/ui" && r.URL.Path != "/ui/portal" {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'")
		w.Write(page)
	})
}
