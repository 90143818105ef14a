package store

import "time"

// Member is one candidate of one election as the members table records it: who
// takes part, in which role, and when it was last seen. The members table is a view
// for operators; no election decision reads it.
type Member struct {
	// Key is the election key.
	Key string
	// ID is the candidate's ID.
	ID string
	// Role is "leader" (holds the lease), "follower" (campaigns, does not hold
	// the lease) or "observer" (never campaigns), as the candidate saw itself when
	// it last wrote its row.
	Role string
	// Paused reports that the candidate does not campaign for now.
	Paused bool
	// Priority is the candidate's configured priority (higher is preferred).
	Priority int64
	// Incarnation is the running process that last wrote the row
	// ([Candidate.Incarnation]); "" when written by a version before the column,
	// or read from a members table without it. PutMembers writes it, Members and
	// MembersOf return it.
	Incarnation string
	// Age is how long ago, by the database clock at the read, the candidate last
	// wrote its row. It is zero in writes.
	Age time.Duration
}
