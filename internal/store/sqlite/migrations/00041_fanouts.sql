-- +goose Up
-- Chunked fan-out (issue 12): a publish to more endpoints than one chunk
-- creates the first chunk of deliveries and this row in its transaction;
-- the engine creates each next chunk (endpoints with id > after_endpoint_id
-- and created_at <= created_at, the publish's time) and advances
-- after_endpoint_id in the same transaction, then deletes the row.
CREATE TABLE fanouts (
    event_id          TEXT PRIMARY KEY REFERENCES events (id) ON DELETE CASCADE,
    tenant            TEXT NOT NULL,
    after_endpoint_id TEXT NOT NULL,            -- last endpoint id done
    exclude_endpoint  TEXT NOT NULL DEFAULT '', -- PublishParams.ExcludeEndpointID
    created_at        INTEGER NOT NULL          -- the publish's time (µs)
) WITHOUT ROWID;

-- +goose Down
DROP TABLE fanouts;
