package api

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/herald-webhooks/herald/internal/store"
)

// Cursors are opaque to clients and bound to the query that made them:
// next_cursor is base64url of nonce ‖ AES-256-GCM(0x01 ‖ query digest ‖
// last key of the page) with the list's name as additional data. A client
// cannot read a cursor (the events list pages by the store's global
// insertion sequence, which would otherwise tell a tenant how many events
// every other tenant published between two pages), forge one, or use one
// list's cursor on another (400 "invalid cursor" instead of a silently
// empty page). The query digest (listQuery) names the route, the scope of
// the credential (but for the event catalog, the same for every key:
// sharedQuery) and the filters as the handler applied them: a cursor of
// the same list with other filters (another tenant, type, state, endpoint,
// since…) would continue a different list from an unrelated position, a
// page that looks right and is not, so it is refused too (400 "cursor
// belongs to a different query; start again without it"). The page size
// (limit) is not part of the query: it may change from page to page.
//
// A cursor issued before the binding (the last key alone, which never
// starts with 0x01) is still accepted on its list: it cannot be forged, and
// refusing it would break a client paging across the upgrade.
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
	listEventTypes = "event-types"
)

// boundCursor marks a cursor's plaintext as bound to a query: 0x01, the
// query digest, then the store's cursor (validID: never 0x01).
const (
	boundCursor  = 0x01
	digestLength = 8
)

// listQuery is the query a page answers: the list, and a digest of the
// route, the credential's tenant and the filters applied.
type listQuery struct {
	list    string
	filters string // the names of the filters, for the refusal
	shared  bool   // the same for every credential (sharedQuery)
	digest  [digestLength]byte
}

// query is the listQuery of list for a request of ctx's credential:
// route names the route (lists sharing a name, such as the deliveries of
// an endpoint, of an event and of every endpoint, are told apart by it),
// filters alternate each filter's name and its value as applied (a
// default spelled out, a tenant resolved: the same query written two ways
// gets the same digest).
func query(ctx context.Context, list, route string, filters ...string) listQuery {
	return scopedQuery(list, route, principal(ctx).Tenant, filters...)
}

// sharedQuery is the listQuery of a list whose answer is the same for
// every credential (the event catalog): bound to the route and filters
// alone, not to the credential's tenant, so any key continues another's
// page. Its digest is an admin's query's (no tenant).
func sharedQuery(list, route string, filters ...string) listQuery {
	q := scopedQuery(list, route, "", filters...)
	q.shared = true
	return q
}

// scopedQuery is the listQuery of list on route for the credential scope
// tenant ("" for an admin's or a shared list's) and filters (see query).
func scopedQuery(list, route, tenant string, filters ...string) listQuery {
	h := sha256.New()
	var names []string
	for i, part := range append([]string{list, route, tenant}, filters...) {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
		if i >= 3 && (i-3)%2 == 0 {
			names = append(names, part)
		}
	}
	q := listQuery{list: list, filters: strings.Join(names, ", ")}
	copy(q.digest[:], h.Sum(nil))
	return q
}

// cursor seals last, the store's cursor after a page of q ("" → "").
func (s *Server) cursor(q listQuery, last string) string {
	if last == "" {
		return ""
	}
	n, o := s.cursors.aead.NonceSize(), s.cursors.aead.Overhead()
	nonce := make([]byte, n, n+1+digestLength+len(last)+o)
	if _, err := rand.Read(nonce); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	plain := make([]byte, 0, 1+digestLength+len(last))
	plain = append(append(append(plain, boundCursor), q.digest[:]...), last...)
	return base64.RawURLEncoding.EncodeToString(s.cursors.aead.Seal(nonce, nonce, plain, []byte(q.list)))
}

// page is the store's ListParams for lq on q: a cursor that is not a
// next_cursor of q's list answers 400 "invalid cursor", one of the list
// made for another query 400 "cursor belongs to a different query".
func (s *Server) page(lq ListQuery, q listQuery) (store.ListParams, error) {
	lp := store.ListParams{Limit: lq.Limit}
	if lq.Cursor == "" {
		return lp, nil
	}
	bad := huma.Error400BadRequest("invalid cursor", &huma.ErrorDetail{Location: "query.cursor",
		Message: "not a next_cursor returned by this list", Value: lq.Cursor})
	b, err := base64.RawURLEncoding.DecodeString(lq.Cursor)
	n := s.cursors.aead.NonceSize()
	if err != nil || len(b) < n+s.cursors.aead.Overhead() {
		return lp, bad
	}
	plain, err := s.cursors.aead.Open(nil, b[:n], b[n:], []byte(q.list))
	if err != nil {
		return lp, bad
	}
	if len(plain) > 0 && plain[0] == boundCursor {
		if len(plain) < 1+digestLength {
			return lp, bad
		}
		if subtle.ConstantTimeCompare(plain[1:1+digestLength], q.digest[:]) != 1 {
			rule := "a next_cursor is bound to the query that returned it and continues only that query"
			if q.filters != "" {
				rule += " (the same path and " + q.filters + "; limit may change)"
			} else {
				rule += " (the same path; limit may change)"
			}
			fix := "repeat that query's filters"
			if !q.shared {
				// The tenant of the credential is part of the query.
				rule += ", asked with an API key (or portal session) of the same tenant as the one that made it: a key of another tenant, or an admin key for a tenant key's cursor, continues none"
				fix = "repeat that query's filters with a key of its tenant"
			}
			return lp, huma.Error400BadRequest("cursor belongs to a different query; start again without it",
				&huma.ErrorDetail{Location: "query.cursor", Message: rule + ": " + fix + ", or start again without a cursor", Value: lq.Cursor})
		}
		plain = plain[1+digestLength:]
	} // else a cursor issued before the binding: its list only
	if !validID(string(plain)) {
		return lp, bad
	}
	lp.Cursor = string(plain)
	return lp, nil
}
