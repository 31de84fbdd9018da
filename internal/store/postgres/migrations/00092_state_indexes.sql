-- +goose NO TRANSACTION
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
-- CONCURRENTLY, outside a transaction: a plain CREATE or DROP INDEX locks
-- deliveries against writes (a DROP against reads too) and, waiting behind
-- a long transaction (a pg_dump, a report), makes every statement on
-- deliveries of every node queue behind it. CONCURRENTLY waits for such
-- transactions without blocking anyone. The new indexes come first, so
-- every reader has one at every moment; each is dropped before it is
-- built, so a run cut short (an index left invalid) is simply run again.
DROP INDEX CONCURRENTLY IF EXISTS deliveries_succeeded;
CREATE INDEX CONCURRENTLY deliveries_succeeded ON deliveries (updated_at) WHERE state = 'succeeded';
DROP INDEX CONCURRENTLY IF EXISTS deliveries_dead;
CREATE INDEX CONCURRENTLY deliveries_dead ON deliveries (updated_at) WHERE state = 'dead';
DROP INDEX CONCURRENTLY IF EXISTS deliveries_paused;
CREATE INDEX CONCURRENTLY deliveries_paused ON deliveries (updated_at) WHERE state = 'paused';
DROP INDEX CONCURRENTLY IF EXISTS deliveries_state_updated;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS deliveries_state_updated ON deliveries (state, updated_at);
DROP INDEX CONCURRENTLY IF EXISTS deliveries_paused;
DROP INDEX CONCURRENTLY IF EXISTS deliveries_dead;
DROP INDEX CONCURRENTLY IF EXISTS deliveries_succeeded;
