-- +goose Up
-- deliveries_state_updated (state, updated_at) held every delivery, and no
-- update of a delivery is HOT (a claim changes the lease columns, in the
-- due and leased indexes' predicates; a completion or a release the
-- state), so every publish, claim, release and completion wrote an entry
-- in it. Without it a pending row's insert, claim and release each write
-- one index entry fewer: the WAL of a claim and completion falls 5.6 %
-- (docs/BENCHMARKS.md, "Round 2, twenty-sixth session"). Its readers want
-- the finished or held rows only: retention (succeeded and dead by age),
-- the dead-letter counts, the lists filtered by state, the gauges. One
-- partial index per such state, as SQLite's migration 00090 did; pending
-- rows are found through deliveries_due and deliveries_leased. A pending
-- row is now in none of them.
--
-- Building the three indexes reads the whole table and blocks writes to
-- deliveries meanwhile: 0.6 s for a million deliveries on a two-core
-- machine (docs/production.md, "Upgrades").
DROP INDEX deliveries_state_updated;
CREATE INDEX deliveries_succeeded ON deliveries (updated_at) WHERE state = 'succeeded';
CREATE INDEX deliveries_dead ON deliveries (updated_at) WHERE state = 'dead';
CREATE INDEX deliveries_paused ON deliveries (updated_at) WHERE state = 'paused';

-- +goose Down
DROP INDEX deliveries_paused;
DROP INDEX deliveries_dead;
DROP INDEX deliveries_succeeded;
CREATE INDEX deliveries_state_updated ON deliveries (state, updated_at);
