-- +goose Up
-- Times are timestamptz (microsecond precision, like the SQLite driver's
-- INTEGER microseconds). Ids and the columns that reference them use the "C"
-- collation, so "ORDER BY id" and the keyset cursors ("id < $cursor") compare
-- bytes, whatever the database's default collation is: ids are time-sortable
-- only byte-wise.
CREATE TABLE api_keys (
    hash       bytea PRIMARY KEY,
    created_at timestamptz NOT NULL
);

CREATE TABLE endpoints (
    id                    text COLLATE "C" PRIMARY KEY,
    tenant                text NOT NULL,
    url                   text NOT NULL,
    description           text NOT NULL DEFAULT '',
    event_types           jsonb NOT NULL DEFAULT '[]', -- array of filter patterns
    headers               jsonb NOT NULL DEFAULT '{}', -- object
    rate_limit_per_second integer NOT NULL DEFAULT 0,
    state                 text NOT NULL CHECK (state IN ('enabled', 'paused', 'disabled')),
    state_reason          text NOT NULL DEFAULT '',
    secrets               text NOT NULL,               -- store.EncodeSecrets: JSON array or "enc:v1:…"
    created_at            timestamptz NOT NULL,
    updated_at            timestamptz NOT NULL,
    failing_since         timestamptz,                 -- start of the current failure streak
    notice                text NOT NULL DEFAULT '',    -- operational event to emit ('' = none)
    notice_at             timestamptz,                 -- when the notice was recorded
    last_spike_at         timestamptz,                 -- last dead-letter spike alert
    kind                  text NOT NULL DEFAULT ''     -- '' (a tenant's) or 'source' (an inbound source's forwarding endpoint)
);
CREATE INDEX endpoints_tenant ON endpoints (tenant, id);
CREATE INDEX endpoints_notice ON endpoints (notice_at) WHERE notice <> '';

CREATE TABLE events (
    id              text COLLATE "C" PRIMARY KEY,
    -- Insertion order: producers may choose their own ids, so events are
    -- listed by seq, and the list cursor is a seq.
    seq             bigint GENERATED ALWAYS AS IDENTITY,
    tenant          text NOT NULL,
    type            text NOT NULL,
    occurred_at     timestamptz NOT NULL,
    body            bytea NOT NULL,
    idempotency_key text,
    fingerprint     text NOT NULL,
    created_at      timestamptz NOT NULL,
    headers         jsonb                 -- forwarded headers (inbound events); NULL = none
);
CREATE UNIQUE INDEX events_idempotency ON events (tenant, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX events_seq ON events (seq);
CREATE INDEX events_tenant ON events (tenant, seq);

CREATE TABLE deliveries (
    id               text COLLATE "C" PRIMARY KEY,
    event_id         text COLLATE "C" NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    endpoint_id      text COLLATE "C" NOT NULL,
    tenant           text NOT NULL,
    event_type       text NOT NULL,
    state            text NOT NULL CHECK (state IN ('pending', 'succeeded', 'dead', 'paused')),
    attempts         integer NOT NULL DEFAULT 0,
    client_errors    integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL,
    last_status_code integer NOT NULL DEFAULT 0,
    last_error       text NOT NULL DEFAULT '',
    replay_base      integer NOT NULL DEFAULT 0,
    lease_owner      text,
    lease_until      timestamptz,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    CHECK ((lease_owner IS NULL) = (lease_until IS NULL))
);
-- The queue: only claimable rows are in this index, so the claim's cost does
-- not grow with succeeded, dead or leased rows, and a backlog of retries due
-- later is skipped by the range bound on next_attempt_at.
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE state = 'pending' AND lease_owner IS NULL;
CREATE INDEX deliveries_leased ON deliveries (lease_until) WHERE lease_owner IS NOT NULL;
CREATE INDEX deliveries_event ON deliveries (event_id);
CREATE INDEX deliveries_endpoint ON deliveries (endpoint_id, state, id);
CREATE INDEX deliveries_state_updated ON deliveries (state, updated_at);

CREATE TABLE attempts (
    delivery_id      text COLLATE "C" NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
    number           integer NOT NULL,
    started_at       timestamptz NOT NULL,
    duration_us      bigint NOT NULL,
    status_code      integer NOT NULL DEFAULT 0,
    error            text NOT NULL DEFAULT '',
    error_detail     text NOT NULL DEFAULT '',
    location         text NOT NULL DEFAULT '',
    response_excerpt text NOT NULL DEFAULT '',
    PRIMARY KEY (delivery_id, number)
);

-- Inbound gateway. A source verifies a provider's requests and forwards
-- them to its destination through its own endpoint (kind 'source', tenant =
-- the source id), so retries, dead letters, replay and metrics apply.
CREATE TABLE sources (
    id          text COLLATE "C" PRIMARY KEY,
    name        text NOT NULL,
    endpoint_id text COLLATE "C" NOT NULL,
    config      text NOT NULL, -- sealed JSON: scheme, secrets, tolerance, dedupe, limits
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);

-- Facts about the database itself, e.g. a value sealed with the encryption
-- key so a node started with another key refuses to run.
CREATE TABLE meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);

-- +goose Down
DROP TABLE meta;
DROP TABLE sources;
DROP TABLE attempts;
DROP TABLE deliveries;
DROP TABLE events;
DROP TABLE endpoints;
DROP TABLE api_keys;
