-- +goose Up
-- A pause, disable or resume moves the endpoint's deliveries in chunks,
-- the first with the state change under the tenant's exclusive lock, the
-- rest each in a transaction of its own under the shared lock, so the
-- tenant's publishes go on meanwhile (SetEndpointState). A resume marks
-- the endpoint: release_due_at is its time, when the held deliveries are
-- due; release_gen counts the endpoint's state changes and names the
-- release (a chunk goes on only while it is the endpoint's last change:
-- two resumes may share one time); releasing_since is renewed by each chunk (the server's
-- clock), and release_after is the last id a chunk reached (the next
-- chunk, or a rescue finishing the release, starts after it); all three
-- are cleared when the release is done. A mark 30 seconds old is
-- a release whose node stopped between chunks; any node's lease rescue
-- finishes it (finishReleases), through endpoints_releasing. Adding
-- nullable columns, or one with a constant default, rewrites nothing; the ALTER's lock, which blocks every
-- statement on endpoints, is waited for 5 s at most, then the migration
-- is run again (upWaitingForLocks), so nothing queues behind it for long.
SET LOCAL lock_timeout = '5s';
ALTER TABLE endpoints ADD COLUMN releasing_since timestamptz;
ALTER TABLE endpoints ADD COLUMN release_due_at timestamptz;
ALTER TABLE endpoints ADD COLUMN release_after text COLLATE "C";
ALTER TABLE endpoints ADD COLUMN release_gen bigint NOT NULL DEFAULT 0;
CREATE INDEX endpoints_releasing ON endpoints (releasing_since) WHERE releasing_since IS NOT NULL;

-- +goose Down
DROP INDEX endpoints_releasing;
ALTER TABLE endpoints DROP COLUMN release_gen;
ALTER TABLE endpoints DROP COLUMN release_after;
ALTER TABLE endpoints DROP COLUMN release_due_at;
ALTER TABLE endpoints DROP COLUMN releasing_since;
