-- +goose Up
-- delivery.dead_lettered notices name the delivery, its event and type,
-- its attempts and its last attempt's status and error class (the other
-- notices leave them empty and read the endpoint's last attempt).
ALTER TABLE notices ADD COLUMN delivery_id TEXT NOT NULL DEFAULT '';
ALTER TABLE notices ADD COLUMN event_id TEXT NOT NULL DEFAULT '';
ALTER TABLE notices ADD COLUMN event_type TEXT NOT NULL DEFAULT '';
ALTER TABLE notices ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE notices ADD COLUMN last_status_code INTEGER NOT NULL DEFAULT 0;
ALTER TABLE notices ADD COLUMN last_error TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE notices DROP COLUMN last_error;
ALTER TABLE notices DROP COLUMN last_status_code;
ALTER TABLE notices DROP COLUMN attempts;
ALTER TABLE notices DROP COLUMN event_type;
ALTER TABLE notices DROP COLUMN event_id;
ALTER TABLE notices DROP COLUMN delivery_id;
