-- +goose Up
-- A pause or resume moves an endpoint's deliveries (holds its pending
-- ones, releases its held ones) in chunks, the first in the transaction
-- that changes the state under the tenant's exclusive lock and the rest one
-- per transaction under its shared lock, so that the tenant's publishes
-- and completions run between them (ops.go, SetEndpointState). This marks
-- an endpoint whose chunks are not all done, so that any node's rescue
-- finishes them when the node that began died meanwhile.
ALTER TABLE endpoints ADD COLUMN deliveries_moving BOOLEAN NOT NULL DEFAULT false;
CREATE INDEX endpoints_deliveries_moving ON endpoints (id) WHERE deliveries_moving;

-- +goose Down
DROP INDEX endpoints_deliveries_moving;
ALTER TABLE endpoints DROP COLUMN deliveries_moving;
