-- +goose Up
-- The failed attempts of the current failure streak (failing_since): an
-- endpoint is disabled only when the streak has lasted --disable-after and
-- counts at least --disable-min-failures failed attempts (issue 13: three
-- failures, a quiet week, and one more failure disabled an endpoint).
-- A streak running at the migration counts its next failure as its first.
ALTER TABLE endpoints ADD COLUMN failure_count integer NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE endpoints DROP COLUMN failure_count;
