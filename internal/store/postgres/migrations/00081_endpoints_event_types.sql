-- +goose Up
-- The endpoints that subscribe to an operational type by name or by a
-- "prefix.*" pattern (an empty list or "*" never matches one): a publish
-- of endpoint.created to a tenant with 10,000 endpoints read all of them
-- through endpoints_tenant before (herald bench fanout).
CREATE INDEX endpoints_event_types ON endpoints USING gin (event_types);

-- +goose Down
DROP INDEX endpoints_event_types;
