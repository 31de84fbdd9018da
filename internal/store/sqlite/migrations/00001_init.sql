-- +goose Up
-- Times are INTEGER microseconds since the Unix epoch (UTC).
CREATE TABLE api_keys (
    hash       BLOB PRIMARY KEY,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE endpoints (
    id                    TEXT PRIMARY KEY,
    tenant                TEXT NOT NULL,
    url                   TEXT NOT NULL,
    description           TEXT NOT NULL DEFAULT '',
    event_types           TEXT NOT NULL DEFAULT '[]', -- JSON array of filter patterns
    headers               TEXT NOT NULL DEFAULT '{}', -- JSON object
    rate_limit_per_second INTEGER NOT NULL DEFAULT 0,
    state                 TEXT NOT NULL CHECK (state IN ('enabled', 'paused', 'disabled')),
    state_reason          TEXT NOT NULL DEFAULT '',
    secrets               TEXT NOT NULL,              -- JSON array, newest first
    created_at            INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL
);
CREATE INDEX endpoints_tenant ON endpoints (tenant, id);

CREATE TABLE events (
    id              TEXT PRIMARY KEY,
    tenant          TEXT NOT NULL,
    type            TEXT NOT NULL,
    occurred_at     INTEGER NOT NULL,
    body            BLOB NOT NULL,
    idempotency_key TEXT,
    fingerprint     TEXT NOT NULL,
    created_at      INTEGER NOT NULL
);
CREATE UNIQUE INDEX events_idempotency ON events (tenant, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX events_tenant ON events (tenant, id);

CREATE TABLE deliveries (
    id               TEXT PRIMARY KEY,
    event_id         TEXT NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    endpoint_id      TEXT NOT NULL,
    tenant           TEXT NOT NULL,
    event_type       TEXT NOT NULL,
    state            TEXT NOT NULL CHECK (state IN ('pending', 'succeeded', 'dead', 'paused')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    client_errors    INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  INTEGER NOT NULL,
    last_status_code INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT NOT NULL DEFAULT '',
    lease_owner      TEXT,
    lease_until      INTEGER,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
);
-- The queue: only claimable rows are in this index, so the claim's cost does
-- not grow with succeeded, dead or leased rows, and a backlog of retries due
-- later is skipped by the range bound on next_attempt_at.
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE state = 'pending' AND lease_owner IS NULL;
CREATE INDEX deliveries_leased ON deliveries (lease_until) WHERE lease_owner IS NOT NULL;
CREATE INDEX deliveries_event ON deliveries (event_id);
CREATE INDEX deliveries_endpoint ON deliveries (endpoint_id, state, id);

CREATE TABLE attempts (
    delivery_id      TEXT NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
    number           INTEGER NOT NULL,
    started_at       INTEGER NOT NULL,
    duration_us      INTEGER NOT NULL,
    status_code      INTEGER NOT NULL DEFAULT 0,
    error            TEXT NOT NULL DEFAULT '',
    error_detail     TEXT NOT NULL DEFAULT '',
    location         TEXT NOT NULL DEFAULT '',
    response_excerpt TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (delivery_id, number)
) WITHOUT ROWID;

-- +goose Down
DROP TABLE attempts;
DROP TABLE deliveries;
DROP TABLE events;
DROP TABLE endpoints;
DROP TABLE api_keys;
