-- +goose Up
-- DeleteEndpoint deletes the endpoint's row and the first 500 of its
-- deliveries under the tenant's exclusive lock, and the rest in chunks of
-- 500, each in a transaction of its own, so the tenant's publishes do not
-- wait for the whole delete (150,000 deliveries took most of a second in
-- one statement). A row here is a delete whose deliveries are not all
-- deleted yet: deleting_since is renewed by each chunk (the server's
-- clock), and (after_state, after_id) is the last delivery a chunk
-- reached, in deliveries_endpoint's order (the next chunk starts after
-- it). A row 30 seconds old is a delete whose node stopped between
-- chunks; any node's lease rescue finishes it (finishDeletions). A new
-- table: no lock on an existing one is taken.
CREATE TABLE endpoint_deletions (
    endpoint_id    text COLLATE "C" PRIMARY KEY,
    deleting_since timestamptz NOT NULL,
    after_state    text NOT NULL DEFAULT '',
    after_id       text COLLATE "C" NOT NULL DEFAULT ''
);
CREATE INDEX endpoint_deletions_since ON endpoint_deletions (deleting_since);

-- +goose Down
-- A delete in progress then leaves the deliveries its chunks had not
-- reached, for good (an older binary attempts a claim of one with an
-- empty endpoint).
DROP TABLE endpoint_deletions;
