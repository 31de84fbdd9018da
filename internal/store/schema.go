package store

import (
	"errors"
	"fmt"
)

// ErrSchemaTooNew means the database was migrated by a newer Herald than
// this binary: its schema version is above the last migration the binary
// embeds. The binary refuses to start rather than run against tables it
// does not know (see docs/production.md, "Upgrades").
var ErrSchemaTooNew = errors.New("database schema is newer than this binary")

// SchemaStatus describes a database's migration state: the version it is
// at (goose's version table; 0 on an empty database) and the last version
// the binary embeds.
type SchemaStatus struct {
	Driver   string `json:"driver"`
	Database int64  `json:"database_version"`
	Binary   int64  `json:"binary_version"`
	// Pending lists the versions the binary would apply at start.
	Pending []int64 `json:"pending"`
}

// CheckSchemaVersion returns an error wrapping ErrSchemaTooNew, naming both
// versions, when db (the database's schema version) is above known (the
// last migration of this binary); nil otherwise.
func CheckSchemaVersion(driver string, db, known int64) error {
	if db > known {
		return fmt.Errorf("%w: the %s database is at schema version %d, this binary knows versions up to %d; run the newer Herald that migrated it (or restore a backup taken before the upgrade)", ErrSchemaTooNew, driver, db, known)
	}
	return nil
}
