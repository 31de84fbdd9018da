-- +goose Up
-- Deliveries due at the same time (held ones released by an enable, dead
-- letters replayed together) are claimed in creation order: the claim
-- orders by (next_attempt_at, id), ids being time-sortable, and this index
-- serves that order without a sort (issue 13).
DROP INDEX deliveries_due;
CREATE INDEX deliveries_due ON deliveries (next_attempt_at, id) WHERE state = 'pending' AND lease_owner IS NULL;

-- +goose Down
DROP INDEX deliveries_due;
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE state = 'pending' AND lease_owner IS NULL;
