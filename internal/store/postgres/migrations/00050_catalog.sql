-- +goose Up
-- The event catalog (docs/contract.md, "Event types and versions"): named
-- event types, each with its versions (a JSON array of {version, schema,
-- example, deprecated, created_at}).
CREATE TABLE event_types (
    name        text COLLATE "C" PRIMARY KEY,
    description text NOT NULL DEFAULT '',
    resource_id text NOT NULL DEFAULT '', -- JSON pointer into data; '' = no sequence
    versions    text NOT NULL,            -- JSON array, ascending by version (text: schemas keep their bytes)
    revision    integer NOT NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);
-- Sequence counters per (tenant, type, resource id) (store.SequenceKeyOf).
-- A publish increments its row in its transaction: the row lock orders the
-- numbers by commit.
CREATE TABLE event_sequences (
    key  text COLLATE "C" PRIMARY KEY,
    last bigint NOT NULL
);
-- Endpoints pin a version per event type (JSON object type → version).
ALTER TABLE endpoints ADD COLUMN versions jsonb NOT NULL DEFAULT '{}';
-- Events keep their older versions' bodies (JSON object version → body,
-- as text so the bytes are kept; NULL = none) and their sequence number
-- (0 = none). Events published before the catalog read as version-less,
-- unnumbered events.
ALTER TABLE events ADD COLUMN version_bodies text;
ALTER TABLE events ADD COLUMN sequence bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE events DROP COLUMN sequence;
ALTER TABLE events DROP COLUMN version_bodies;
ALTER TABLE endpoints DROP COLUMN versions;
DROP TABLE event_sequences;
DROP TABLE event_types;
