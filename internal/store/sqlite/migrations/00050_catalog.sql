-- +goose Up
-- The event catalog (docs/contract.md, "Event types and versions"): named
-- event types, each with its versions (a JSON array of {version, schema,
-- example, deprecated, created_at}).
CREATE TABLE event_types (
    name        TEXT PRIMARY KEY,
    description TEXT NOT NULL DEFAULT '',
    resource_id TEXT NOT NULL DEFAULT '', -- JSON pointer into data; '' = no sequence
    versions    TEXT NOT NULL,            -- JSON array, ascending by version
    revision    INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
-- Sequence counters per (tenant, type, resource id) (store.SequenceKeyOf).
CREATE TABLE event_sequences (
    key  TEXT PRIMARY KEY,
    last INTEGER NOT NULL
);
-- Endpoints pin a version per event type (JSON object type → version).
ALTER TABLE endpoints ADD COLUMN versions TEXT NOT NULL DEFAULT '{}';
-- Events keep their older versions' bodies (JSON object version → body;
-- '' = none) and their sequence number (0 = none). Events published
-- before the catalog read as version-less, unnumbered events.
ALTER TABLE events ADD COLUMN version_bodies TEXT NOT NULL DEFAULT '';
ALTER TABLE events ADD COLUMN sequence INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE events DROP COLUMN sequence;
ALTER TABLE events DROP COLUMN version_bodies;
ALTER TABLE endpoints DROP COLUMN versions;
DROP TABLE event_sequences;
DROP TABLE event_types;
