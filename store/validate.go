package store

// ValidateName checks that s can be an election key or a candidate ID in every
// dialect: 1 to [MaxKeyLen] bytes of UTF-8, no NUL byte (PostgreSQL text cannot hold
// one) and no trailing space (MySQL's PAD SPACE collations would make "x" and "x "
// one key). what names the value in the error, which wraps [ErrInvalidArgument].
func ValidateName(what, s string) error { return validateName(what, s) }

// ValidateNames checks a key and the candidate IDs of a call, in that order, with
// [ValidateName].
func ValidateNames(key string, ids ...string) error { return validateNames(key, ids...) }
