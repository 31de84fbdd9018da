-- +goose Up
-- API keys get an id, a name, a role and an optional tenant; portal sessions
-- are stored in the same table (kind 'portal'). Keys stored before this
-- migration were admin keys and stay admin keys.
ALTER TABLE api_keys
    ADD COLUMN id text COLLATE "C",
    ADD COLUMN kind text NOT NULL DEFAULT 'key',
    ADD COLUMN name text NOT NULL DEFAULT '',
    ADD COLUMN role text NOT NULL DEFAULT 'admin',
    ADD COLUMN tenant text NOT NULL DEFAULT '',
    ADD COLUMN expires_at timestamptz,
    ADD COLUMN revoked_at timestamptz,
    ADD COLUMN last_used_at timestamptz;
UPDATE api_keys SET id = 'key_' || encode(substring(hash from 1 for 13), 'hex'), name = 'admin key (generated at first start)' WHERE id IS NULL;
ALTER TABLE api_keys ALTER COLUMN id SET NOT NULL;
CREATE UNIQUE INDEX api_keys_id ON api_keys (id);
CREATE INDEX api_keys_list ON api_keys (kind, id);

-- Producer-chosen event ids are unique per tenant: such an event is stored
-- under "<tenant>~<id>" (store.EventKey). Herald's own ids ("evt_" + 26
-- characters, operational "evt_op_…") are unique everywhere and unchanged.
ALTER TABLE deliveries DROP CONSTRAINT deliveries_event_id_fkey;
UPDATE deliveries SET event_id = tenant || '~' || event_id
 WHERE NOT (event_id LIKE 'evt\_%' AND (length(event_id) = 30 OR event_id LIKE 'evt\_op\_%'))
   AND strpos(event_id, '~') = 0;
UPDATE events SET id = tenant || '~' || id
 WHERE NOT (id LIKE 'evt\_%' AND (length(id) = 30 OR id LIKE 'evt\_op\_%'))
   AND strpos(id, '~') = 0;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_event_id_fkey FOREIGN KEY (event_id) REFERENCES events (id) ON DELETE CASCADE;

-- +goose Down
ALTER TABLE deliveries DROP CONSTRAINT deliveries_event_id_fkey;
UPDATE deliveries SET event_id = substr(event_id, strpos(event_id, '~') + 1) WHERE strpos(event_id, '~') > 0;
UPDATE events SET id = substr(id, strpos(id, '~') + 1) WHERE strpos(id, '~') > 0;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_event_id_fkey FOREIGN KEY (event_id) REFERENCES events (id) ON DELETE CASCADE;
DELETE FROM api_keys WHERE kind <> 'key' OR role <> 'admin';
DROP INDEX api_keys_list;
DROP INDEX api_keys_id;
ALTER TABLE api_keys DROP COLUMN last_used_at, DROP COLUMN revoked_at, DROP COLUMN expires_at, DROP COLUMN tenant,
    DROP COLUMN role, DROP COLUMN name, DROP COLUMN kind, DROP COLUMN id;
