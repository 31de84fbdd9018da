-- +goose Up
-- A publish of a type not catalogued looks for a catalogued name differing
-- only in case (Store.EventTypeCaseVariant, and the catalog check in the
-- publish's transaction: catalogRevisionSQL), which the API refuses. Names
-- are ASCII, which NOCASE folds; without this index each such publish
-- scanned event_types.
CREATE INDEX event_types_name_nocase ON event_types (name COLLATE NOCASE);

-- +goose Down
DROP INDEX event_types_name_nocase;
