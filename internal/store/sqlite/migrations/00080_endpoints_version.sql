-- +goose Up
-- A counter of changes to what a publish reads from endpoints (which
-- exist, their tenant, state and event types). The triggers move it on
-- every such write, whichever statement made it, so the driver's
-- in-memory copy of a large tenant's endpoints (targetCache) is known
-- stale by one read of this row instead of re-reading every endpoint on
-- every publish.
CREATE TABLE endpoints_version (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
);
INSERT INTO endpoints_version (id, version) VALUES (1, 0);

-- +goose StatementBegin
CREATE TRIGGER endpoints_version_insert AFTER INSERT ON endpoints BEGIN
    UPDATE endpoints_version SET version = version + 1 WHERE id = 1;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER endpoints_version_update AFTER UPDATE OF id, tenant, state, event_types ON endpoints BEGIN
    UPDATE endpoints_version SET version = version + 1 WHERE id = 1;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER endpoints_version_delete AFTER DELETE ON endpoints BEGIN
    UPDATE endpoints_version SET version = version + 1 WHERE id = 1;
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER endpoints_version_delete;
DROP TRIGGER endpoints_version_update;
DROP TRIGGER endpoints_version_insert;
DROP TABLE endpoints_version;
