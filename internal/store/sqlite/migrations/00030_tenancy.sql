-- +goose Up
-- API keys get an id, a name, a role and an optional tenant; portal sessions
-- are stored in the same table (kind 'portal'). Keys stored before this
-- migration were admin keys and stay admin keys.
ALTER TABLE api_keys ADD COLUMN id TEXT NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN kind TEXT NOT NULL DEFAULT 'key';
ALTER TABLE api_keys ADD COLUMN name TEXT NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN role TEXT NOT NULL DEFAULT 'admin';
ALTER TABLE api_keys ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN expires_at INTEGER;
ALTER TABLE api_keys ADD COLUMN revoked_at INTEGER;
ALTER TABLE api_keys ADD COLUMN last_used_at INTEGER;
UPDATE api_keys SET id = 'key_' || lower(hex(substr(hash, 1, 13))), name = 'admin key (generated at first start)' WHERE id = '';
CREATE UNIQUE INDEX api_keys_id ON api_keys (id);
CREATE INDEX api_keys_list ON api_keys (kind, id);

-- Producer-chosen event ids are unique per tenant: such an event is stored
-- under "<tenant>~<id>" (store.EventKey). Herald's own ids ("evt_" + 26
-- characters, operational "evt_op_…") are unique everywhere and unchanged.
PRAGMA defer_foreign_keys = ON;
UPDATE deliveries SET event_id = tenant || '~' || event_id
 WHERE NOT (event_id LIKE 'evt\_%' ESCAPE '\' AND (length(event_id) = 30 OR event_id LIKE 'evt\_op\_%' ESCAPE '\'))
   AND instr(event_id, '~') = 0;
UPDATE events SET id = tenant || '~' || id
 WHERE NOT (id LIKE 'evt\_%' ESCAPE '\' AND (length(id) = 30 OR id LIKE 'evt\_op\_%' ESCAPE '\'))
   AND instr(id, '~') = 0;

-- +goose Down
PRAGMA defer_foreign_keys = ON;
UPDATE deliveries SET event_id = substr(event_id, instr(event_id, '~') + 1) WHERE instr(event_id, '~') > 0;
UPDATE events SET id = substr(id, instr(id, '~') + 1) WHERE instr(id, '~') > 0;
DELETE FROM api_keys WHERE kind <> 'key' OR role <> 'admin';
DROP INDEX api_keys_list;
DROP INDEX api_keys_id;
ALTER TABLE api_keys DROP COLUMN last_used_at;
ALTER TABLE api_keys DROP COLUMN revoked_at;
ALTER TABLE api_keys DROP COLUMN expires_at;
ALTER TABLE api_keys DROP COLUMN tenant;
ALTER TABLE api_keys DROP COLUMN role;
ALTER TABLE api_keys DROP COLUMN name;
ALTER TABLE api_keys DROP COLUMN kind;
ALTER TABLE api_keys DROP COLUMN id;
