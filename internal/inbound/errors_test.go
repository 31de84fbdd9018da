package inbound_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/inbound"
	"github.com/herald-webhooks/herald/internal/store"
	"github.com/herald-webhooks/herald/internal/testutil"
)

const errSecret = "errors-test-github-secret"

// errStore answers GetSource with source (or getErr) and PublishEvent with
// publishErr (or a created event); every other method is unused here.
type errStore struct {
	store.Store
	source     store.Source
	getErr     error
	publishErr error
	// pending, handedOff and fanOut are the created event's PublishResult;
	// chunk, when not nil, records the publish's FanOutChunk.
	pending, handedOff int
	fanOut             bool
	chunk              *int
}

func (s errStore) GetSource(_ context.Context, id string) (store.Source, error) {
	if s.getErr != nil {
		return store.Source{}, s.getErr
	}
	src := s.source
	src.ID = id
	return src, nil
}

func (s errStore) PublishEvent(_ context.Context, p store.PublishParams) (store.PublishResult, error) {
	if s.publishErr != nil {
		return store.PublishResult{}, s.publishErr
	}
	if s.chunk != nil {
		*s.chunk = p.FanOutChunk
	}
	return store.PublishResult{Event: p.Event, Created: true, Pending: s.pending, HandedOff: s.handedOff, FanOut: s.fanOut}, nil
}

// serveGitHub serves g one GitHub-signed pull_request webhook (signed with
// errSecret) at path and returns the answer.
func serveGitHub(g *inbound.Gateway, path string) *httptest.ResponseRecorder {
	mux := http.NewServeMux()
	mux.Handle("/in/{source_id}", g)
	body := []byte(`{"action":"opened"}`)
	m := hmac.New(sha256.New, []byte(errSecret))
	m.Write(body)
	req := httptest.NewRequest("POST", path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "pull_request")
	req.Header.Set("X-GitHub-Delivery", "d-1")
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, req)
	return w
}

// TestStoreErrorStatuses: the gateway answers a store error with the
// status of its code in the one mapping the API uses too
// (store.Code.HTTPStatus): a database outage (or an error that carries no
// code) 503 with a retry detail, so the provider retries; a stored source
// configuration that does not decode 500, logged as a bug; a duplicate is
// never an error (200), an unknown source 404.
func TestStoreErrorStatuses(t *testing.T) {
	goodConfig := fmt.Appendf(nil, `{"scheme":"github","secrets":[%q]}`, errSecret)
	outage := fmt.Errorf("get source: %w: %w", store.ErrUnavailable, errors.New("dial tcp 127.0.0.1:5432: connection refused"))
	var decode error = &json.SyntaxError{Offset: 1}
	for _, tc := range []struct {
		name   string
		st     errStore
		status int
		detail string // the problem's detail, exactly ("" for a 200)
		log    string // in the log ("" = nothing at error level)
		bug    bool   // logged as a bug
	}{
		{"source outage", errStore{getErr: outage}, 503, "temporarily unavailable; retry", "connection refused", false},
		{"source unclassified database error", errStore{getErr: errors.New("driver: bad connection")}, 503, "temporarily unavailable; retry", "bad connection", false},
		{"source canceled", errStore{getErr: fmt.Errorf("get source: %w", context.Canceled)}, 503, "temporarily unavailable; retry", "context canceled", false},
		{"source config does not decode", errStore{source: store.Source{Config: []byte(`{"scheme":`)}}, 500, "internal error (logged)", "source", true},
		{"source internal error", errStore{getErr: fmt.Errorf("get source: %w", store.Internal(fmt.Errorf("source config: %w", decode)))}, 500, "internal error (logged)", "source config", true},
		{"unknown source", errStore{getErr: fmt.Errorf("get source: %w", store.ErrNotFound)}, 404, "no such source", "", false},
		{"publish outage", errStore{source: store.Source{Config: goodConfig}, publishErr: fmt.Errorf("publish: %w: %w", store.ErrUnavailable, errors.New("disk I/O error"))},
			503, "could not store the event; retry", "disk I/O error", false},
		{"publish internal error", errStore{source: store.Source{Config: goodConfig}, publishErr: fmt.Errorf("publish: %w", store.Internal(errors.New("headers do not encode")))},
			500, "internal error (logged)", "headers do not encode", true},
		{"publish invalid", errStore{source: store.Source{Config: goodConfig}, publishErr: store.Errorf(store.CodeInvalid, "event id too long")},
			400, "event id too long", "event id too long", false},
		{"publish duplicate with other bytes", errStore{source: store.Source{Config: goodConfig}, publishErr: store.Errorf(store.CodeConflict, "event id reused with other data")},
			200, "", "", false},
		{"publish stored", errStore{source: store.Source{Config: goodConfig}}, 200, "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &testutil.SyncBuffer{}
			g := inbound.New(inbound.Config{Store: tc.st, Logger: slog.New(slog.NewTextHandler(logs, nil)),
				Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }})
			w := serveGitHub(g, "/in/src_errors")
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			if tc.detail != "" {
				var p struct {
					Status int    `json:"status"`
					Detail string `json:"detail"`
				}
				if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
					t.Fatalf("%s: %v", w.Body, err)
				}
				if p.Status != tc.status || p.Detail != tc.detail {
					t.Errorf("problem status %d, detail %q; want %d, %q", p.Status, p.Detail, tc.status, tc.detail)
				}
			}
			got := logs.String()
			errLine := ""
			for line := range strings.SplitSeq(got, "\n") {
				if strings.Contains(line, "level=ERROR") {
					errLine = line
					break
				}
			}
			switch {
			case tc.log == "" && errLine != "":
				t.Errorf("logged an error %q, want none", errLine)
			case tc.log != "" && !strings.Contains(errLine, tc.log):
				t.Errorf("error log %q, want it to contain %q (all: %q)", errLine, tc.log, got)
			}
			if isBug := strings.Contains(errLine, `msg="bug: `); isBug != tc.bug {
				t.Errorf("error log %q: logged as a bug = %v, want %v", errLine, isBug, tc.bug)
			}
		})
	}
}

// TestGatewayWakesTheEngineForUnclaimedDeliveries: an accepted request
// wakes the delivery engine only when its event left due deliveries that
// were not handed off to the engine as the publish committed
// (PublishResult.HandedOff): those need a claim, the others none; a
// fan-out left to the engine wakes its fan-out loop, as an API publish
// does, and the gateway publishes with the configured fan-out chunk.
func TestGatewayWakesTheEngineForUnclaimedDeliveries(t *testing.T) {
	goodConfig := fmt.Appendf(nil, `{"scheme":"github","secrets":[%q]}`, errSecret)
	for _, tc := range []struct {
		name               string
		pending, handedOff int
		fanOut             bool
		wake, wakeFanOut   bool
	}{
		{"due, none handed off", 2, 0, false, true, false},
		{"due, some handed off", 2, 1, false, true, false},
		{"due, all handed off", 2, 2, false, false, false},
		{"nothing due (held)", 0, 0, false, false, false},
		{"a fan-out left to the engine", 2, 2, true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var woken, fanWoken atomic.Int32
			var chunk int
			g := inbound.New(inbound.Config{Store: errStore{source: store.Source{Config: goodConfig}, pending: tc.pending, handedOff: tc.handedOff, fanOut: tc.fanOut, chunk: &chunk},
				Notify: func() { woken.Add(1) }, NotifyFanOut: func() { fanWoken.Add(1) }, FanOutChunk: 7,
				Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }})
			w := serveGitHub(g, "/in/src_wake")
			if w.Code != 200 {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			if got := woken.Load() > 0; got != tc.wake {
				t.Fatalf("engine woken %d times, want woken: %v", woken.Load(), tc.wake)
			}
			if got := fanWoken.Load() > 0; got != tc.wakeFanOut {
				t.Fatalf("engine told of a fan-out %d times, want: %v", fanWoken.Load(), tc.wakeFanOut)
			}
			if chunk != 7 {
				t.Fatalf("published with FanOutChunk %d, want the configured 7", chunk)
			}
		})
	}
}
