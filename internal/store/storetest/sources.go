package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/store"
)

// newSource returns a source and its forwarding endpoint (Kind source,
// Tenant the source id), as the API creates them.
func newSource(name string) store.CreateSourceParams {
	src := store.Source{ID: store.NewID("src"), Name: name, Config: []byte(`{"scheme":"github","secrets":["s3cr3t-provider-` + name + `"]}`), CreatedAt: base, UpdatedAt: base}
	ep := newEndpoint(src.ID)
	ep.URL = "https://example.com/in/" + name
	return store.CreateSourceParams{Source: src, Endpoint: ep}
}

// sources: create, get, list (newest first), update (name, config,
// destination), delete (with its endpoint), and the errors of each.
func (s suite) sources(t *testing.T) {
	s.run(t, "CreateGetUpdateDelete", func(t *testing.T, f *fixture) {
		p := newSource("gh")
		src, err := f.s.CreateSource(f.ctx, p)
		if err != nil {
			t.Fatalf("CreateSource: %v", err)
		}
		if src.ID != p.Source.ID || src.Name != "gh" || src.EndpointID != p.Endpoint.ID || string(src.Config) != string(p.Source.Config) {
			t.Errorf("CreateSource = %+v, want the source with its endpoint %s", src, p.Endpoint.ID)
		}
		got, err := f.s.GetSource(f.ctx, src.ID)
		if err != nil || got.Name != "gh" || got.EndpointID != p.Endpoint.ID || string(got.Config) != string(p.Source.Config) {
			t.Errorf("GetSource = %+v, %v", got, err)
		}
		ep := f.getEndpoint(p.Endpoint.ID)
		if ep.Kind != store.EndpointKindSource || ep.Tenant != src.ID {
			t.Errorf("the forwarding endpoint: kind %q tenant %q, want %q and the source id", ep.Kind, ep.Tenant, store.EndpointKindSource)
		}
		_, err = f.s.CreateSource(f.ctx, p)
		wantRefusal(t, "CreateSource with existing ids", err, store.Exists("endpoint "+p.Endpoint.ID))
		again := newSource("gh2")
		again.Source.ID = src.ID
		_, err = f.s.CreateSource(f.ctx, again)
		wantRefusal(t, "CreateSource with an existing source id", err, store.Exists("source "+src.ID))
		if _, err := f.s.GetEndpoint(f.ctx, again.Endpoint.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the endpoint of the refused source: %v, want ErrNotFound (nothing stored)", err)
		}

		name, cfg, dest := "github", []byte(`{"scheme":"github","secrets":["rotated-provider-secret"]}`), "https://example.com/in/other"
		up, err := f.s.UpdateSource(f.ctx, store.UpdateSourceParams{ID: src.ID, Name: &name, Config: &cfg, DestinationURL: &dest, Now: base.Add(time.Minute)})
		if err != nil || up.Name != name || string(up.Config) != string(cfg) {
			t.Errorf("UpdateSource = %+v, %v", up, err)
		}
		if got, err := f.s.GetSource(f.ctx, src.ID); err != nil || got.Name != name || string(got.Config) != string(cfg) {
			t.Errorf("GetSource after the update = %+v, %v", got, err)
		}
		if ep := f.getEndpoint(p.Endpoint.ID); ep.URL != dest {
			t.Errorf("the forwarding endpoint's URL = %q, want %q", ep.URL, dest)
		}

		if err := f.s.DeleteSource(f.ctx, src.ID); err != nil {
			t.Fatalf("DeleteSource: %v", err)
		}
		_, err = f.s.GetSource(f.ctx, src.ID)
		wantErr(t, "GetSource after DeleteSource", err, store.ErrNotFound)
		_, err = f.s.GetEndpoint(f.ctx, p.Endpoint.ID)
		wantErr(t, "the forwarding endpoint after DeleteSource", err, store.ErrNotFound)
	})
	s.run(t, "UnknownID", func(t *testing.T, f *fixture) {
		_, err := f.s.GetSource(f.ctx, "src_unknown")
		wantErr(t, "GetSource(unknown)", err, store.ErrNotFound)
		name := "x"
		_, err = f.s.UpdateSource(f.ctx, store.UpdateSourceParams{ID: "src_unknown", Name: &name, Now: base})
		wantErr(t, "UpdateSource(unknown)", err, store.ErrNotFound)
		wantErr(t, "DeleteSource(unknown)", f.s.DeleteSource(f.ctx, "src_unknown"), store.ErrNotFound)
	})
	s.run(t, "ListNewestFirst", func(t *testing.T, f *fixture) {
		var want []string
		for _, name := range []string{"a", "b", "c"} {
			src, err := f.s.CreateSource(f.ctx, newSource(name))
			if err != nil {
				t.Fatal(err)
			}
			want = append([]string{src.ID}, want...)
		}
		pg, err := f.s.ListSources(f.ctx, store.ListParams{Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		rest, err := f.s.ListSources(f.ctx, store.ListParams{Limit: 2, Cursor: pg.NextCursor})
		if err != nil {
			t.Fatal(err)
		}
		got := append(idsOf(pg.Data, func(s store.Source) string { return s.ID }), idsOf(rest.Data, func(s store.Source) string { return s.ID })...)
		if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || pg.NextCursor == "" || rest.NextCursor != "" {
			t.Errorf("ListSources pages = %v (cursors %q, %q), want %v newest first", got, pg.NextCursor, rest.NextCursor, want)
		}
	})
}

// secrets: rotation keeps the previous secret until the overlap ends (or
// drops it at once), revocation drops an older one, never the current.
func (s suite) secrets(t *testing.T) {
	s.run(t, "RotateWithOverlapThenRevoke", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme")
		old := e.Secrets[0].Value
		now := base.Add(time.Hour)
		got, err := f.s.RotateSecret(f.ctx, store.RotateSecretParams{ID: e.ID, Secret: "whsec_new", PreviousExpiresAt: now.Add(time.Hour), Now: now})
		if err != nil {
			t.Fatalf("RotateSecret: %v", err)
		}
		if len(got.Secrets) != 2 || got.Secrets[0].Value != "whsec_new" || !got.Secrets[0].ExpiresAt.IsZero() ||
			got.Secrets[1].Value != old || !got.Secrets[1].ExpiresAt.Equal(now.Add(time.Hour)) {
			t.Fatalf("after a rotation with an hour's overlap: %+v, want the new secret current and the old one until %v", got.Secrets, now.Add(time.Hour))
		}
		if stored := f.getEndpoint(e.ID); len(stored.ActiveSecrets(now)) != 2 {
			t.Errorf("active secrets during the overlap = %v, want 2", stored.ActiveSecrets(now))
		}
		_, err = f.s.RevokeSecret(f.ctx, store.RevokeSecretParams{ID: e.ID, SecretID: store.SecretID("whsec_new"), Now: now})
		wantErr(t, "RevokeSecret(the current secret)", err, store.ErrCurrentSecret)
		wantErr(t, "RevokeSecret(the current secret)", err, store.ErrConflict)
		_, err = f.s.RevokeSecret(f.ctx, store.RevokeSecretParams{ID: e.ID, SecretID: "sec_unknown", Now: now})
		wantErr(t, "RevokeSecret(unknown secret)", err, store.ErrNotFound)
		got, err = f.s.RevokeSecret(f.ctx, store.RevokeSecretParams{ID: e.ID, SecretID: store.SecretID(old), Now: now})
		if err != nil || len(got.Secrets) != 1 || got.Secrets[0].Value != "whsec_new" {
			t.Errorf("RevokeSecret(the old secret) = %+v, %v; want only the new one", got.Secrets, err)
		}
		if stored := f.getEndpoint(e.ID); len(stored.Secrets) != 1 || stored.Secrets[0].Value != "whsec_new" {
			t.Errorf("stored secrets after the revocation = %+v", stored.Secrets)
		}
	})
	s.run(t, "RotateWithoutOverlap", func(t *testing.T, f *fixture) {
		e := f.endpoint("acme")
		got, err := f.s.RotateSecret(f.ctx, store.RotateSecretParams{ID: e.ID, Secret: "whsec_next", PreviousExpiresAt: base, Now: base.Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		if act := got.ActiveSecrets(base.Add(time.Minute)); len(act) != 1 || act[0] != "whsec_next" {
			t.Errorf("active secrets after a rotation without overlap = %v, want only the new one", act)
		}
	})
	s.run(t, "ConcurrentRotationsLoseNoSecret", func(t *testing.T, f *fixture) {
		// Four rotations at once, each with a day's overlap: every one
		// reads the list the one before it wrote, so the endpoint ends with
		// the four new secrets and the original (5, the cap), one current.
		e := f.endpoint("acme")
		orig := e.Secrets[0].Value
		now := base.Add(time.Hour)
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() {
				_, errs[i] = f.s.RotateSecret(f.ctx, store.RotateSecretParams{ID: e.ID, Secret: fmt.Sprintf("whsec_concurrent_%d", i), PreviousExpiresAt: now.Add(24 * time.Hour), Now: now})
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("rotation %d: %v", i, err)
			}
		}
		got := f.getEndpoint(e.ID).Secrets
		seen := map[string]bool{}
		current := 0
		for _, sc := range got {
			seen[sc.Value] = true
			if sc.ExpiresAt.IsZero() {
				current++
			}
		}
		if len(got) != store.MaxSecrets || len(seen) != store.MaxSecrets || !seen[orig] || current != 1 || !got[0].ExpiresAt.IsZero() {
			t.Fatalf("after 4 concurrent rotations: %+v; want the 4 new secrets and the original, the first one current", got)
		}
		for i := range errs {
			if !seen[fmt.Sprintf("whsec_concurrent_%d", i)] {
				t.Errorf("rotation %d's secret was lost: %+v", i, got)
			}
		}
	})
	s.run(t, "RotationCapAndExpiryBoundary", func(t *testing.T, f *fixture) {
		// Six rotations a minute apart, each with an hour's overlap: the
		// sixth leaves the current secret and the 4 newest older ones (the
		// original is dropped before its overlap ends). A secret stops
		// signing at its expires_at exactly, and is then no longer
		// revocable (404).
		e := f.endpoint("acme")
		var got store.Endpoint
		for i := range 6 {
			now := base.Add(time.Duration(i) * time.Minute)
			var err error
			if got, err = f.s.RotateSecret(f.ctx, store.RotateSecretParams{ID: e.ID, Secret: fmt.Sprintf("whsec_r%d", i), PreviousExpiresAt: now.Add(time.Hour), Now: now}); err != nil {
				t.Fatal(err)
			}
		}
		want := []string{"whsec_r5", "whsec_r4", "whsec_r3", "whsec_r2", "whsec_r1"}
		last := base.Add(5 * time.Minute)
		if act := got.ActiveSecrets(last); fmt.Sprint(act) != fmt.Sprint(want) {
			t.Fatalf("active secrets after 6 rotations = %v, want %v", act, want)
		}
		// whsec_r1 became an older secret at minute 2, until minute 62.
		r1End := base.Add(2*time.Minute + time.Hour)
		if exp := got.Secrets[4].ExpiresAt; !exp.Equal(r1End) {
			t.Fatalf("whsec_r1 expires at %v, want %v", exp, r1End)
		}
		if act := got.ActiveSecrets(r1End.Add(-time.Microsecond)); len(act) != 5 {
			t.Errorf("a microsecond before whsec_r1's expiry: %v, want 5 active", act)
		}
		if act := got.ActiveSecrets(r1End); len(act) != 4 || act[3] != "whsec_r2" {
			t.Errorf("at whsec_r1's expiry exactly: %v, want it gone", act)
		}
		_, err := f.s.RevokeSecret(f.ctx, store.RevokeSecretParams{ID: e.ID, SecretID: store.SecretID("whsec_r1"), Now: r1End})
		wantErr(t, "RevokeSecret(a secret at its expiry)", err, store.ErrNotFound)
		got, err = f.s.RevokeSecret(f.ctx, store.RevokeSecretParams{ID: e.ID, SecretID: store.SecretID("whsec_r2"), Now: r1End})
		if err != nil || len(got.Secrets) != 3 || got.Secrets[0].Value != "whsec_r5" || got.Secrets[2].Value != "whsec_r3" {
			t.Errorf("RevokeSecret(whsec_r2) at whsec_r1's expiry = %+v, %v; want r5, r4, r3 (the expired r1 dropped too)", got.Secrets, err)
		}
	})
	s.run(t, "UnknownEndpoint", func(t *testing.T, f *fixture) {
		_, err := f.s.RotateSecret(f.ctx, store.RotateSecretParams{ID: "ep_unknown", Secret: "whsec_x", Now: base})
		wantErr(t, "RotateSecret(unknown endpoint)", err, store.ErrNotFound)
		_, err = f.s.RevokeSecret(f.ctx, store.RevokeSecretParams{ID: "ep_unknown", SecretID: "sec_x", Now: base})
		wantErr(t, "RevokeSecret(unknown endpoint)", err, store.ErrNotFound)
	})
}
