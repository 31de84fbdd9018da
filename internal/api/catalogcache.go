package api

import (
	"context"
	"errors"
	"sync"

	"github.com/herald-webhooks/herald/internal/store"
)

// catalogAttempts bounds the checks of one publish: a publish answered
// store.ErrStaleCatalog this many times (the catalog entry changing under
// every one) gets that error, a 409.
const catalogAttempts = 3

// catalogCacheSize bounds the entries of a catalogCache: past it the cache
// starts over (producers may publish many uncatalogued types).
const catalogCacheSize = 4096

// catalogCache keeps, per event type name, the catalog entry a publish was
// last checked against, so a publish does not read the catalog first (a
// round trip on PostgreSQL). It is never trusted alone: the publish passes
// the entry's revision (0: not catalogued) in store.PublishParams.
// CatalogRevision, the store compares it with the stored one in the
// publish's transaction, and a stale one (a change through this node or
// another) is answered store.ErrStaleCatalog, nothing stored; the API then
// forgets the entry and checks the event again against a fresh read. A
// publish the cached entry refuses is checked again against a fresh read
// too before it is refused (the store never sees it, so it cannot say the
// entry is stale).
type catalogCache struct {
	mu sync.Mutex
	m  map[string]cachedEventType
}

type cachedEventType struct {
	t     store.EventType
	found bool // false: not catalogued (revision 0); t then holds a case variant's name, or is zero
}

func newCatalogCache() *catalogCache {
	return &catalogCache{m: map[string]cachedEventType{}}
}

// eventType returns the cached entry of name (cached true), or reads it
// (GetEventType) and keeps it. found is false for an uncatalogued type; t
// then holds only the name of a catalogued type that differs from name
// only in case (t.Name != "", Store.EventTypeCaseVariant), which the
// publish refuses, or is zero. err is the
// store's (never ErrNotFound). fresh skips the cache (the read after a
// stale answer, or before refusing a publish).
func (c *catalogCache) eventType(ctx context.Context, db store.Store, name string, fresh bool) (t store.EventType, found, cached bool, err error) {
	if !fresh {
		c.mu.Lock()
		e, ok := c.m[name]
		c.mu.Unlock()
		if ok {
			return e.t, e.found, true, nil
		}
	}
	t, err = db.GetEventType(ctx, name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		// Uncatalogued: is a case variant? One indexed read of names
		// (Store.EventTypeCaseVariant), once per name and node (then
		// cached); the store answers a publish checked without seeing one
		// catalogued since ErrStaleCatalog.
		var variant string
		if variant, err = db.EventTypeCaseVariant(ctx, name); err != nil {
			return store.EventType{}, false, false, err
		}
		t = store.EventType{Name: variant}
	case err != nil:
		return t, false, false, err
	default:
		found = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// A slower read of an older revision does not replace a newer one
	// (types are never deleted: revisions only grow).
	if old, ok := c.m[name]; ok && old.t.Revision > t.Revision {
		return t, found, false, nil
	}
	if len(c.m) >= catalogCacheSize {
		clear(c.m)
	}
	c.m[name] = cachedEventType{t: t, found: found}
	return t, found, false, nil
}

// forget drops name's entry (after a stale answer, or a change of the
// type through this node).
func (c *catalogCache) forget(name string) {
	c.mu.Lock()
	delete(c.m, name)
	c.mu.Unlock()
}
