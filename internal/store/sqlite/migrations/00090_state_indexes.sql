-- +goose Up
-- deliveries_state_updated (state, updated_at) held every delivery, so a
-- completion moved its entry (a delete and an insert), a publish and a
-- retry wrote one, and a release or a hold moved one: 6 % of the store's
-- instructions per delivered delivery and 7 % of a publish's
-- (docs/BENCHMARKS.md, "Round 2, eighth session"). Its readers want the
-- finished or held rows only: retention (succeeded and dead by age), the
-- dead-letter counts, the lists filtered by state. One partial index per
-- such state; pending rows are found through deliveries_due (every
-- pending row: leases are in memory on SQLite, lease_owner stays NULL).
DROP INDEX deliveries_state_updated;
CREATE INDEX deliveries_succeeded ON deliveries (updated_at) WHERE state = 'succeeded';
CREATE INDEX deliveries_dead ON deliveries (updated_at) WHERE state = 'dead';
CREATE INDEX deliveries_paused ON deliveries (updated_at) WHERE state = 'paused';

-- +goose Down
DROP INDEX deliveries_paused;
DROP INDEX deliveries_dead;
DROP INDEX deliveries_succeeded;
CREATE INDEX deliveries_state_updated ON deliveries (state, updated_at);
