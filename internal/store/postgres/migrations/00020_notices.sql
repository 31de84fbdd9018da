-- +goose Up
-- Operational events wait in an outbox, one row per state change, emitted
-- in id order and deleted once emitted (issue 13: a single notice column
-- on the endpoint lost endpoint.disabled when the endpoint was enabled
-- again before it was emitted). Each row carries a snapshot of the
-- endpoint (tenant, URL, state) at the change: the endpoint may be gone
-- (endpoint.deleted) or changed again when the notice is emitted.
CREATE TABLE notices (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint_id  text COLLATE "C" NOT NULL,
    tenant       text NOT NULL,
    url          text NOT NULL,
    kind         text NOT NULL DEFAULT '',
    state        text NOT NULL,
    state_reason text NOT NULL DEFAULT '',
    type         text NOT NULL,
    created_at   timestamptz NOT NULL
);
INSERT INTO notices (endpoint_id, tenant, url, kind, state, state_reason, type, created_at)
SELECT id, tenant, url, kind, state, state_reason, notice, notice_at FROM endpoints WHERE notice <> '' ORDER BY notice_at, id;
DROP INDEX endpoints_notice;
ALTER TABLE endpoints DROP COLUMN notice_at;
ALTER TABLE endpoints DROP COLUMN notice;

-- +goose Down
ALTER TABLE endpoints ADD COLUMN notice text NOT NULL DEFAULT '';
ALTER TABLE endpoints ADD COLUMN notice_at timestamptz;
CREATE INDEX endpoints_notice ON endpoints (notice_at) WHERE notice <> '';
UPDATE endpoints SET notice = n.type, notice_at = n.created_at
  FROM (SELECT DISTINCT ON (endpoint_id) endpoint_id, type, created_at FROM notices ORDER BY endpoint_id, id DESC) AS n
 WHERE endpoints.id = n.endpoint_id;
DROP TABLE notices;
