package sqlite

import (
	"context"
	"database/sql"
	"sync"
)

// The endpoints a publish fans out to. A publish reads every endpoint of
// its tenant (id, state, event types) to match the event's type; for a
// tenant with 10,000 endpoints that read and the parsing of each
// endpoint's event types took 12 ms on the single writer, once per publish
// group with that tenant in it — and creating those endpoints emits one
// endpoint.created event each, so a bulk import cost O(n²) of writer time
// (`herald bench fanout`, docs/BENCHMARKS.md). targetCache keeps the parsed
// endpoints of large tenants in memory, valid while endpoints_version (a
// row that triggers move on every insert, delete and change of tenant,
// state or event types, migration 00080) has not changed; a publish group
// reads that row once.

// cacheTargetsFrom is the number of endpoints from which a tenant's are
// kept: a small tenant's read costs about as much as the version check,
// and leaving them out bounds the cache by the endpoints table (a
// publisher may name any number of tenants without endpoints).
const cacheTargetsFrom = 64

const (
	tenantTargetsSQL    = "SELECT id, state, event_types, created_at FROM endpoints WHERE tenant = ? ORDER BY id"
	endpointsVersionSQL = "SELECT version FROM endpoints_version WHERE id = 1"
)

// targetCache holds the endpoints of large tenants as of one
// endpoints_version. Entries are never modified once stored (publishTx
// filters into a new slice).
type targetCache struct {
	mu       sync.Mutex
	version  int64
	byTenant map[string][]target
}

// get returns tenant's endpoints and the version they were read at, if
// the tenant is kept.
func (c *targetCache) get(tenant string) ([]target, int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.byTenant[tenant]
	return t, c.version, ok
}

// put stores a tenant's endpoints read at version; a new version drops
// every entry of the old one.
func (c *targetCache) put(tenant string, version int64, targets []target) {
	if len(targets) < cacheTargetsFrom {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.version != version || c.byTenant == nil {
		c.version, c.byTenant = version, map[string][]target{}
	}
	c.byTenant[tenant] = targets
}

// targets returns the endpoints of tenant as tx sees them: from the
// group's copy, the cache when endpoints_version is unchanged, or read.
// (tx is the single writer's: no endpoint change commits between the
// reads of one call.)
func (s *Store) targets(ctx context.Context, tx *sql.Tx, tenant string, g *groupTx) ([]target, error) {
	if g != nil {
		if all, ok := g.tenants[tenant]; ok {
			return all, nil
		}
	}
	// Only a kept (large) tenant costs the version read before its
	// endpoints; a small one is read, and the version only if it turns out
	// large enough to keep.
	all, at, kept := s.targetCache.get(tenant)
	if kept {
		version, err := s.endpointsVersion(ctx, tx, g)
		if err != nil {
			return nil, err
		}
		kept = version == at
	}
	if !kept {
		var err error
		if all, err = s.tenantTargets(ctx, tx, tenant, g); err != nil {
			return nil, err
		}
		if len(all) >= cacheTargetsFrom {
			version, err := s.endpointsVersion(ctx, tx, g)
			if err != nil {
				return nil, err
			}
			s.targetCache.put(tenant, version, all)
		}
	}
	if g != nil {
		g.tenants[tenant] = all
	}
	return all, nil
}

// endpointsVersion reads endpoints_version in tx, once per group.
func (s *Store) endpointsVersion(ctx context.Context, tx *sql.Tx, g *groupTx) (int64, error) {
	if g != nil && g.versionRead {
		return g.version, nil
	}
	st, err := g.stmt(ctx, s, tx, endpointsVersionSQL)
	if err != nil {
		return 0, wrap("publish", err)
	}
	var v int64
	if err := st.QueryRowContext(ctx).Scan(&v); err != nil {
		return 0, wrap("publish", err)
	}
	if g != nil {
		g.version, g.versionRead = v, true
	}
	return v, nil
}
