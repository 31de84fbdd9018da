-- +goose Up
-- A portal session records the key that created it: revoking that key
-- revokes its sessions too. Sessions created before this have no creator.
ALTER TABLE api_keys ADD COLUMN created_by TEXT NOT NULL DEFAULT '';
CREATE INDEX api_keys_created_by ON api_keys (created_by) WHERE created_by <> '';

-- +goose Down
DROP INDEX api_keys_created_by;
ALTER TABLE api_keys DROP COLUMN created_by;
