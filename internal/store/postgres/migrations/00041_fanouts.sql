-- +goose Up
-- Chunked fan-out (issue 12): a publish to more endpoints than one chunk
-- creates the first chunk of deliveries and this row in its transaction;
-- an engine (any node: the row is claimed FOR UPDATE SKIP LOCKED) creates
-- each next chunk (endpoints with id > after_endpoint_id and created_at <=
-- created_at, the publish's time) and advances after_endpoint_id in the
-- same transaction, then deletes the row.
CREATE TABLE fanouts (
    event_id          text COLLATE "C" PRIMARY KEY REFERENCES events (id) ON DELETE CASCADE,
    tenant            text NOT NULL,
    after_endpoint_id text COLLATE "C" NOT NULL, -- last endpoint id done
    exclude_endpoint  text NOT NULL DEFAULT '',  -- PublishParams.ExcludeEndpointID
    created_at        timestamptz NOT NULL       -- the publish's time
);

-- +goose Down
DROP TABLE fanouts;
