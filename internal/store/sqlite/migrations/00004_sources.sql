-- +goose Up
-- Inbound gateway. A source verifies a provider's requests and forwards
-- them to its destination through its own endpoint (kind 'source', tenant =
-- the source id), so retries, dead letters, replay and metrics apply.
CREATE TABLE sources (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    endpoint_id TEXT NOT NULL,
    config      TEXT NOT NULL, -- sealed JSON: scheme, secrets, tolerance, dedupe, limits
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
ALTER TABLE endpoints ADD COLUMN kind TEXT NOT NULL DEFAULT '';     -- '' (a tenant's) or 'source'
ALTER TABLE events ADD COLUMN headers TEXT NOT NULL DEFAULT '';      -- JSON object of forwarded headers ('' = none)

-- +goose Down
ALTER TABLE events DROP COLUMN headers;
ALTER TABLE endpoints DROP COLUMN kind;
DROP TABLE sources;
