-- +goose Up
-- Facts about the database itself, e.g. a value sealed with the encryption
-- key so a node started with another key refuses to run.
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

-- +goose Down
DROP TABLE meta;
