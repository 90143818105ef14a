// Package casleadertest is a kit for testing code that runs under casleader's
// leader election on real databases.
//
// [NewDB] gives a test a database of each dialect: from CASLEADER_MYSQL_DSN /
// CASLEADER_POSTGRES_DSN when set, else a container started through
// github.com/ory/dockertest/v3 (see [NewDB] for the images, their reuse across test
// binaries and their cleanup), and for SQLite a file in the test's temporary
// directory.
//
// The package is its own module, so that its test-only dependencies (dockertest and
// the Docker client) stay out of what a user of the library downloads.
package casleadertest
