package postgres

import (
	"crypto/rand"
	"sync"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/internal/secretbox"
	"github.com/herald-webhooks/herald/internal/store"
)

// takingHandOff reserves every delivery offered and records each Take.
type takingHandOff struct {
	owner string
	until time.Time
	mu    sync.Mutex
	takes [][]store.Claim
	n     []int
}

func (h *takingHandOff) Reserve(string, int) int    { return 1 << 20 }
func (h *takingHandOff) Lease() (string, time.Time) { return h.owner, h.until }
func (h *takingHandOff) Take(claims []store.Claim, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.takes = append(h.takes, claims)
	h.n = append(h.n, n)
}

// TestHandOffLeavesAnUnreadableEndpointToTheClaims: a node whose key
// cannot open an endpoint's secrets (it missed a key rotation) still
// publishes; the endpoint's delivery is not handed off (its worker is
// given back), its lease is dropped on the publish's transaction, and a
// node with the key claims it at once — while the readable endpoint's
// delivery of the same publish is handed off.
func TestHandOffLeavesAnUnreadableEndpointToTheClaims(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	box := func() store.SecretBox {
		key := make([]byte, secretbox.KeySize)
		rand.Read(key)
		b, err := secretbox.New(key)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	good := openStore(t, dbURL, WithSecretBox(box()))
	sealed := createEndpoint(t, good, newEndpoint("acme"))
	wrong := openStore(t, dbURL, WithSecretBox(box()))
	if _, err := wrong.CreateEndpoint(t.Context(), store.CreateEndpointParams{Endpoint: newEndpoint("acme")}); err != nil {
		t.Fatal(err)
	}
	h := &takingHandOff{owner: "node_wrong", until: base.Add(time.Hour)}
	wrong.SetHandOff(h)
	res := publish(t, wrong, newEvent("acme"), base)
	if res.Pending != 2 || res.HandedOff != 1 {
		t.Fatalf("publish: %d pending, %d handed off; want 2, 1 (the endpoint this node cannot open left to the claims)", res.Pending, res.HandedOff)
	}
	if len(h.takes) != 1 || h.n[0] != 2 || len(h.takes[0]) != 1 || h.takes[0][0].Endpoint.ID == sealed.ID {
		t.Fatalf("takes %v of %v reserved; want one Take of 2 workers with the readable endpoint's claim", h.takes, h.n)
	}
	cs, err := good.ClaimDeliveries(t.Context(), store.ClaimParams{Owner: "node_good", Limit: 8, Lease: time.Hour, Now: base})
	if err != nil || len(cs) != 1 || cs[0].Endpoint.ID != sealed.ID {
		t.Fatalf("claim with the key: %d claims, %v; want the sealed endpoint's delivery, its lease dropped", len(cs), err)
	}
}

// TestHandOffNotForPublishTx: a publish on a caller's transaction commits
// when the caller commits: nothing of it is handed off (its deliveries are
// claimed).
func TestHandOffNotForPublishTx(t *testing.T) {
	t.Parallel()
	dbURL := newSchema(t)
	s := openStore(t, dbURL)
	createEndpoint(t, s, newEndpoint("acme"))
	h := &takingHandOff{owner: "w", until: base.Add(time.Hour)}
	s.SetHandOff(h)
	conn := rawConn(t, dbURL)
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	res, err := PublishTx(t.Context(), tx, store.PublishParams{Event: newEvent("acme"), Now: base})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if res.HandedOff != 0 || len(h.takes) != 0 {
		t.Fatalf("PublishTx handed off %d (%d takes)", res.HandedOff, len(h.takes))
	}
	cs, err := s.ClaimDeliveries(t.Context(), store.ClaimParams{Owner: "w2", Limit: 8, Lease: time.Hour, Now: base})
	if err != nil || len(cs) != 1 {
		t.Fatalf("claim: %d claims, %v; want the delivery", len(cs), err)
	}
}
