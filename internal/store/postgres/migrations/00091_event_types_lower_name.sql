-- +goose Up
-- A publish looks for catalogued names by their folded form (the catalog
-- check in its transaction, queueCatalogCheck and catalogRevisionSQL, and
-- Store.EventTypeCaseVariant on a cache miss), so that a name differing
-- only in case from a catalogued one is refused. Without this index each
-- of those reads scanned event_types, for catalogued types too.
CREATE INDEX event_types_lower_name ON event_types (lower(name));

-- +goose Down
DROP INDEX event_types_lower_name;
