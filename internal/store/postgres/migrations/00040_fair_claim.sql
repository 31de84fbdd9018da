-- +goose Up
-- Fair claiming across tenants (issue 12): the claimer walks the tenants
-- that have claimable deliveries (a skip scan of this index, one probe per
-- tenant) and takes each one's oldest due deliveries in turn. Partial like
-- deliveries_due: it holds only claimable rows.
CREATE INDEX deliveries_due_tenant ON deliveries (tenant, next_attempt_at) WHERE state = 'pending' AND lease_owner IS NULL;

-- +goose Down
DROP INDEX deliveries_due_tenant;
