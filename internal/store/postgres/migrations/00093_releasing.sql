-- +goose Up
-- A resume releases an endpoint's held deliveries in chunks, the first
-- with the state change under the tenant's exclusive lock, the rest each in
-- a transaction of its own under the shared lock, so the tenant's
-- publishes go on meanwhile (SetEndpointState). releasing_since marks a
-- release in progress: each chunk sets it to its time and the last clears
-- it. A mark older than a minute is a release whose node stopped between
-- chunks; any node's lease rescue finishes it (finishReleases). Adding a
-- nullable column rewrites nothing.
ALTER TABLE endpoints ADD COLUMN releasing_since timestamptz;

-- +goose Down
ALTER TABLE endpoints DROP COLUMN releasing_since;
