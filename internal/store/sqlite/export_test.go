package sqlite

// Statements whose query plans the tests check.
var (
	InsertAttemptsValuesSQL = insertAttemptsValuesSQL
	CompleteValuesSQL       = completeValuesSQL
)
