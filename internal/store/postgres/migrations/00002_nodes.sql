-- Nodes delivering from this database (store.Membership): each node
-- upserts its row every heartbeat; a row not seen for 10 of its node's
-- own heartbeat intervals is deleted.
-- +goose Up
CREATE TABLE nodes (
    id                 text COLLATE "C" PRIMARY KEY,
    started_at         timestamptz NOT NULL DEFAULT now(),
    seen_at            timestamptz NOT NULL,
    interval_us        bigint NOT NULL CHECK (interval_us > 0),
    attempt_timeout_us bigint NOT NULL CHECK (attempt_timeout_us > 0)
);

-- +goose Down
DROP TABLE nodes;
