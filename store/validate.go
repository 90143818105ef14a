package store

import "errors"

// MaxKeyLen is the longest election key or candidate ID, in bytes.
const MaxKeyLen = 255

// ErrInvalidArgument is returned for a key or ID that the table cannot hold, or not
// the same way on every database: empty, longer than [MaxKeyLen] bytes, not valid
// UTF-8, holding a NUL byte (PostgreSQL text cannot hold one), or ending in a space
// (MySQL's PAD SPACE collations would make "x" and "x " one key). Every store method
// checks its key and IDs before it sends anything.
var ErrInvalidArgument = errors.New("store: invalid argument")
