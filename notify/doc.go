// Package notify wakes followers the moment a leader gives its lease up, so that a
// graceful handover (resign, shutdown, planned handover) completes within a few
// round trips instead of a poll interval. It implements casleader.Notifier: set
// Config.Notifier to a PostgreSQL notifier (postgres.Notifier, in package
// store/postgres: it needs pgx) or a [MySQL] one, and run the notifier's Run method
// next to the elector. This package holds what every notifier shares ([Hub]) and
// the MySQL notifier, which needs only database/sql: it links no driver.
//
// Notifications are only a speed-up. Followers still read the row when the lease
// they last observed can expire, and at least every poll interval, so a notifier that
// is down, misconfigured or behind a proxy that breaks it costs latency, never safety
// or liveness. Both notifiers test themselves and fall back to that polling by
// themselves.
//
// # PostgreSQL: LISTEN/NOTIFY
//
// The release and handover statements of postgres.Store notify channel
// [postgres.NotifyChannel] in the same statement, so the notification is delivered when
// (and only if) the write commits. postgres.Notifier listens on one dedicated connection
// per process, whatever the number of keys, and calls the subscribed elector's Wake.
// After every (re)connection it sends a notification through a second connection and
// waits for it: through PgBouncer in transaction pooling mode, where LISTEN does not
// survive the transaction, this self-test fails, the notifier reports
// Listening false, logs it once at Warn and retests every RetestInterval.
// Give it a DSN that reaches PostgreSQL directly (or PgBouncer in session mode) to
// get notifications while the elections themselves go through PgBouncer.
//
// # MySQL and MariaDB: named locks
//
// MySQL has no LISTEN. [MySQL] uses named locks (GET_LOCK) instead, one per election
// key and term: the leader of term T holds lock (key, T) on a dedicated connection
// for as long as it leads, and releases it right after its release or handover write
// returned. Each follower waits for that lock with GET_LOCK on a dedicated connection
// of its own; the server grants it the moment the leader releases it, or the moment a
// crashed leader's connection drops, and the follower releases it at once and reads
// the row. A crashed leader's lease still has to expire in database time before
// anybody can take over: the wake-up only saves the poll. A lock granted at once
// (the new leader has not taken it yet, or runs without a notifier) is retried after
// a pause, and after a few such grants the follower stops waiting on that term.
// Lock names are "casleader:" + 32 hex digits of SHA-256(table, key) + ":" + term.
//
// On a Galera cluster named locks are local to a node. [MySQL] detects a Galera
// node, warns once, and has each follower also read the row every
// MySQLConfig.GaleraCheckInterval (1 s) while it waits, so a release on another node
// wakes it within that interval.
//
// Connections: one per process for the locks held, plus one per key followed, taken
// from the *sql.DB given to [NewMySQL]. Give it its own small pool.
package notify
