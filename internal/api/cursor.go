package api

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"fmt"

	"github.com/danielgtaylor/huma/v2"

	"github.com/herald-webhooks/herald/internal/store"
)

// Cursors are opaque to clients and bound to the list that made them:
// next_cursor is base64url of nonce ‖ AES-256-GCM(last key of the page)
// with the list's name as additional data. A client cannot read a cursor
// (the events list pages by the store's global insertion sequence, which
// would otherwise tell a tenant how many events every other tenant
// published between two pages), forge one, or use one list's cursor on
// another (400 "invalid cursor" instead of a silently empty page).
//
// The key comes from Config.CursorKey (derived by the app from the
// encryption key, so every node of a cluster and a restarted node accept
// the cursors of the others); without one, a random key per process.
type cursorBox struct{ aead cipher.AEAD }

func newCursorBox(key []byte) (*cursorBox, error) {
	if key == nil {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
	}
	if len(key) != 32 {
		return nil, fmt.Errorf("api: Config.CursorKey must be 32 bytes, got %d", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &cursorBox{aead: aead}, nil
}

// Lists whose cursors are told apart (the additional data of a cursor).
const (
	listEndpoints  = "endpoints"
	listEvents     = "events"
	listDeliveries = "deliveries"
	listAPIKeys    = "api-keys"
	listSessions   = "portal-sessions"
	listSources    = "sources"
)

// cursor seals last, the store's cursor after a page of list ("" → "").
func (s *Server) cursor(list, last string) string {
	if last == "" {
		return ""
	}
	nonce := make([]byte, s.cursors.aead.NonceSize(), s.cursors.aead.NonceSize()+len(last)+s.cursors.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(s.cursors.aead.Seal(nonce, nonce, []byte(last), []byte(list)))
}

// page is the store's ListParams for q on list; a cursor that is not a
// next_cursor of that list answers 400 "invalid cursor".
func (s *Server) page(q ListQuery, list string) (store.ListParams, error) {
	lp := store.ListParams{Limit: q.Limit}
	if q.Cursor == "" {
		return lp, nil
	}
	bad := huma.Error400BadRequest("invalid cursor", &huma.ErrorDetail{Location: "query.cursor",
		Message: "not a next_cursor returned by this list", Value: q.Cursor})
	b, err := base64.RawURLEncoding.DecodeString(q.Cursor)
	n := s.cursors.aead.NonceSize()
	if err != nil || len(b) < n+s.cursors.aead.Overhead() {
		return lp, bad
	}
	last, err := s.cursors.aead.Open(nil, b[:n], b[n:], []byte(list))
	if err != nil || !validID(string(last)) {
		return lp, bad
	}
	lp.Cursor = string(last)
	return lp, nil
}
