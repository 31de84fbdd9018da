-- +goose Up
ALTER TABLE endpoints ADD COLUMN failing_since INTEGER;          -- start of the current failure streak
ALTER TABLE endpoints ADD COLUMN notice TEXT NOT NULL DEFAULT '';  -- operational event to emit ('' = none)
ALTER TABLE endpoints ADD COLUMN notice_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE endpoints ADD COLUMN last_spike_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE deliveries ADD COLUMN replay_base INTEGER NOT NULL DEFAULT 0;
CREATE INDEX endpoints_notice ON endpoints (notice_at) WHERE notice <> '';
CREATE INDEX deliveries_state_updated ON deliveries (state, updated_at);

-- +goose Down
DROP INDEX deliveries_state_updated;
DROP INDEX endpoints_notice;
ALTER TABLE deliveries DROP COLUMN replay_base;
ALTER TABLE endpoints DROP COLUMN last_spike_at;
ALTER TABLE endpoints DROP COLUMN notice_at;
ALTER TABLE endpoints DROP COLUMN notice;
ALTER TABLE endpoints DROP COLUMN failing_since;
