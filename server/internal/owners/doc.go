// Package owners keeps one rule of the server's SQL: every table has one
// owner, the package whose code alone writes it (INSERT, UPDATE, DELETE,
// TRUNCATE). Other packages change the table by calling the owner's
// functions (…Tx(ctx, q, …), taking the caller's transaction), never by SQL
// of their own; reads may stay where they are needed. The owners are
// listed, one table a line, in owners_test.go, whose test parses every
// non-test Go file under server/internal and fails on a write found outside
// its table's owner, on a table written that has no owner, and on an owner
// listed for a table no migration creates. The package has no code.
package owners
