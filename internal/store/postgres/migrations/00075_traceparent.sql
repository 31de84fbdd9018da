-- +goose Up
-- The W3C traceparent a publish carried (or the publish span's, when
-- tracing is on), stored with the event so that its attempts join the
-- publisher's trace on any node and after a restart; '' = none.
ALTER TABLE events ADD COLUMN traceparent text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE events DROP COLUMN traceparent;
