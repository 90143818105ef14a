// Package casleader elects one leader among N replicas of a service through a single
// row in a SQL database the service already has: MySQL/MariaDB, PostgreSQL, or an
// embedded SQLite file for one host.
//
// Each election is one row: its key, a version bumped by every write, the leader's ID,
// the term (the version at which the leader won: its fencing token) and tick_time,
// written with the database's clock. Every write is a compare-and-set on the version,
// so exactly one of any set of racers wins a given version.
//
// # Roles
//
//	     ┌──────── lease live: sleep until it can expire ───────┐
//	     ▼                                                      │
//	┌──────────┐  row missing / released / expired   ┌───────────┴─┐
//	│ Follower │ ──────────────────────────────────▶ │  Candidate  │
//	└──────────┘ ◀────────── CAS lost ────────────── └─────────────┘
//	     ▲                                                │ CAS won
//	     │ deadline passed, row taken over,               ▼
//	     │ resign (stop acting, drain, release)     ┌──────────┐
//	     └──────────────────────────────────────────│  Leader  │ ◀─ renewal won:
//	                                                └──────────┘    trust = send + R
//
// A follower reads the row and the database's time in one statement, learns how long
// the lease has left, and sleeps until then (at most PollInterval). When the lease has
// expired by the database clock it campaigns from the version it read. The leader
// renews every HeartbeatInterval and trusts its leadership until RenewDeadline after
// the send time of its last successful renewal, by its own monotonic clock.
//
// # Guarantees
//
//   - At most one candidate wins each version; the fencing token ([Elector.Token])
//     strictly increases across terms of one election. Terms are taken from the
//     database clock (the greater of version+1 and its time in microseconds), so
//     they keep increasing even when a database failover that lost writes rolls the
//     row back, as long as the new server's clock is not behind the old one's by
//     more than the failover took (see docs/SAFETY.md).
//   - A follower takes over only after the lease expired in database time
//     (LeaseDuration after the leader's last renewal executed), or after the leader
//     released it. Client wall clocks are never compared with tick_time. On a
//     multi-primary cluster (Galera), where the server that stamps tick_time and the
//     one that computes its age may have different clocks, expiry is judged by the
//     age minus the freshest age read of the same term, which cancels their offset
//     (a candidate whose first read of a term shows it expired waits LeaseDuration);
//     the offset is reported by [Elector.ClockSkew].
//   - [Elector.IsLeader] is false from the instant the trust deadline passes, even in
//     a process that was frozen and has just resumed; the leader's context is
//     cancelled by the same deadline.
//   - A candidate acts only in a term it won, was handed by name, or resumed
//     ([Config.ResumeTerm]); a live lease under its ID in any other term is never
//     adopted, and another live process with the same ID is reported
//     ([ErrDuplicateID]). A term ends safely: the row is released only after the
//     leader's work has returned (else the lease expires by itself), and neither
//     the leader's work nor a listener runs on the goroutine that renews the lease.
//   - Belief intervals of two candidates do not overlap provided
//     RenewDeadline·(1+ρ) + ε < LeaseDuration·(1−ρ), where ρ bounds the clock rate
//     error of the leader's host and of the database, and ε is the time between a
//     leader's last IsLeader check and the end of the action it guards.
//
// Not promised: ε cannot be bounded in general (GC pauses, a frozen VM, a slow disk).
// Writes that must never be made by two leaders must be fenced with the term's token
// inside the same database transaction ([Elector.Guard]). The database must provide linearizable
// single-row compare-and-set (InnoDB, PostgreSQL and SQLite do), its clock must not
// step, and replicas that can be promoted must be synchronous.
//
// # Observation
//
// [Config.Hooks] observe the elector from the inside: every store call, the start
// and end of each term, each extension of its trust, each change of the observed
// leader or clock skew, each told with the key and the candidate's ID, so that the
// same [Hooks] serve a Group per key. They run on the goroutine that renews
// the lease and must not block;
// packages metrics and healthz are built on them, and the elector keeps the store
// it is given, so [Elector.Guard] works whatever is plugged in. [Elector.Listen]
// is the leadership stream for code that may be slow: the latest [Status], in
// order, never delaying the elector.
//
// # Tuning
//
// HeartbeatInterval < RenewDeadline < LeaseDuration. The defaults (2 s, 10 s, 15 s)
// follow client-go; set only LeaseDuration and the others keep their ratios
// (RenewDeadline 2/3 of it, HeartbeatInterval 1/5 of RenewDeadline). LeaseDuration bounds crash failover; LeaseDuration − RenewDeadline
// is the safety margin; RenewDeadline / HeartbeatInterval is how many renewals may
// fail in a row before leadership is lost. Give the elector a small pool of its own:
// renewals starved by the application's queries are the commonest cause of lost
// leadership.
//
// # Preferred leader
//
// Config.Priority makes a candidate preferred: a leader hands its lease over to a
// live candidate of strictly higher priority, through the same safe handover as
// [Elector.HandoverTo], once that candidate's members row has been written live over
// a full LeaseDuration (and at the earliest a lease after the leader's term began);
// equal priorities never hand over, paused candidates and observers never receive
// the lease, and each handover raises the leader's priority, so the lease never
// flaps between candidates that stay up. The rule is shared by [Elector] and
// a Group; docs/operations.md, "Preferred leader", gives it in full.
package casleader
