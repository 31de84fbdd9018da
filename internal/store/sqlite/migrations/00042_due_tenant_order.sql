-- +goose Up
-- A tenant's deliveries due at the same time (held ones released by an
-- enable or a resume, dead letters replayed together) are claimed in
-- creation order even when a claim takes fewer than are due: the fair
-- claim orders by (tenant, next_attempt_at, id), ids being time-sortable,
-- and this index serves that order without a sort (issue 13, point 5; the
-- index of the fair claim, migration 00040, had no id).
DROP INDEX deliveries_due_tenant;
CREATE INDEX deliveries_due_tenant ON deliveries (tenant, next_attempt_at, id) WHERE state = 'pending' AND lease_owner IS NULL;

-- +goose Down
DROP INDEX deliveries_due_tenant;
CREATE INDEX deliveries_due_tenant ON deliveries (tenant, next_attempt_at) WHERE state = 'pending' AND lease_owner IS NULL;
