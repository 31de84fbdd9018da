-- +goose Up
-- Operational events wait in an outbox, one row per state change, emitted
-- in id order and deleted once emitted (issue 13: a single notice column
-- on the endpoint lost endpoint.disabled when the endpoint was enabled
-- again before it was emitted). Each row carries a snapshot of the
-- endpoint (tenant, URL, state) at the change: the endpoint may be gone
-- (endpoint.deleted) or changed again when the notice is emitted.
CREATE TABLE notices (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    endpoint_id  TEXT NOT NULL,
    tenant       TEXT NOT NULL,
    url          TEXT NOT NULL,
    kind         TEXT NOT NULL DEFAULT '',
    state        TEXT NOT NULL,
    state_reason TEXT NOT NULL DEFAULT '',
    type         TEXT NOT NULL,
    created_at   INTEGER NOT NULL
);
INSERT INTO notices (endpoint_id, tenant, url, kind, state, state_reason, type, created_at)
SELECT id, tenant, url, kind, state, state_reason, notice, notice_at FROM endpoints WHERE notice <> '' ORDER BY notice_at, id;
DROP INDEX endpoints_notice;
ALTER TABLE endpoints DROP COLUMN notice_at;
ALTER TABLE endpoints DROP COLUMN notice;

-- +goose Down
ALTER TABLE endpoints ADD COLUMN notice TEXT NOT NULL DEFAULT '';
ALTER TABLE endpoints ADD COLUMN notice_at INTEGER NOT NULL DEFAULT 0;
CREATE INDEX endpoints_notice ON endpoints (notice_at) WHERE notice <> '';
UPDATE endpoints SET notice = n.type, notice_at = n.created_at
  FROM (SELECT endpoint_id, type, created_at FROM notices WHERE id IN (SELECT max(id) FROM notices GROUP BY endpoint_id)) AS n
 WHERE endpoints.id = n.endpoint_id;
DROP TABLE notices;
