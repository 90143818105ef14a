// Package sqlstore is the SQL engine of the election stores: all DML of the
// election table for each dialect (single and batched compare-and-sets, the
// guard, the table check), driver-free. The dialect packages (store/postgres,
// store/mysql, store/sqlite) add their driver: a [Backend] that runs statements,
// the classification of the driver's errors, and the constructors users call.
//
// Every write is a compare-and-set on the row's version: it names the version it
// read and bumps it by one. A lost compare-and-set is an outcome (swapped ==
// false), never an error. Errors that do reach callers are classified with the
// kinds of package store, so callers never import a driver.
//
// Times are judged only by the database: a read returns the age of the last
// renewal computed by the database clock in the same statement, and an election
// requires the lease to have expired by the database clock at execution. No client
// clock is ever compared with a stored time.
//
// The engine and each dialect's SQL text live here, not in the dialect packages,
// because the batched statements and the guard share the dialects' SQL fragments
// (the database clock, the age of a row, a new term): one place to read them all.
package sqlstore
