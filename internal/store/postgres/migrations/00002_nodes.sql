-- Nodes delivering from this database (store.Membership): each node
-- upserts its row every heartbeat; rows not seen for the TTL are deleted.
-- +goose Up
CREATE TABLE nodes (
    id         text COLLATE "C" PRIMARY KEY,
    started_at timestamptz NOT NULL DEFAULT now(),
    seen_at    timestamptz NOT NULL
);

-- +goose Down
DROP TABLE nodes;
