// Package notify wakes followers the moment a leader gives its lease up, so that a
// graceful handover (resign, shutdown, planned handover) completes within a round
// trip or two instead of a poll interval.
//
// The dialect stores (store/postgres, store/mysql, store/sqlite) have their wake-ups
// built in: each holds a [Wakeups], behind the store's Subscribe, Observed and
// Leading methods (store.Driver), which the electors and groups call. Its [Hub]
// is woken directly by the store's own release and handover writes, so electors and groups on one store in one process wake each
// other with no database round trip, and its [Listener] (started with the first
// subscriber and stopped with the last, one per store whatever the number of
// electors) carries the writes of other processes: LISTEN/NOTIFY on PostgreSQL, the
// [MySQL] named locks, a watched file for SQLite. A wake-up carries the row version
// at which the lease was released, when it is known: the follower then sends its
// election from that version without reading the row first. A wake-up without a
// version (0: a reconnected listener) sends the follower, when its
// store can, into an election that wins only a released row, or one handed over to
// its ID, whatever its version (store.Driver.ElectReleased), followed by a read only
// if that did not win. A handover's wake-up says so, and names its target: the
// target ([HandedOver]) claims the lease at once with that election, and the other
// followers ([HandedToAnother], for those subscribed with their ID: [SubscribeAs])
// read the row a few milliseconds later, so that their reads do not compete with the
// target's claim for the database and the host. On MySQL the named lock cannot say
// it: every follower is woken as if it were the target.
//
// Notifications are only a speed-up. Followers still read the row when the lease
// they last observed can expire, and at least every poll interval, so a notifier that
// is down, misconfigured or behind a proxy that breaks it costs latency, never safety
// or liveness. A notification that is stale only makes the election lose its
// compare-and-set: the statement itself checks, in the database, that the row is at
// the version sent and its lease released or expired.
//
// # PostgreSQL: LISTEN/NOTIFY
//
// The release and handover statements of postgres.Store notify channel
// postgres.NotifyChannel in the same statement, so the notification is delivered when
// (and only if) the write commits; the payload is "table version key". The listener
// LISTENs on one dedicated connection per store, taken from the store's pool, and
// wakes the subscribers. After every (re)connection it sends a notification through
// the pool and waits for it: through PgBouncer in transaction pooling mode, where
// LISTEN does not survive the transaction, this self-test fails, the listener
// reports Listening false and retests every minute. There, give the store
// postgres.ListenDSN with a DSN that reaches PostgreSQL directly (or PgBouncer in
// session mode) for its listener, to get notifications while the elections
// themselves go through PgBouncer.
//
// # MySQL and MariaDB: named locks
//
// MySQL has no LISTEN. [MySQL] uses named locks (GET_LOCK) instead, one per election
// key and term: the leader of term T holds lock (key, T) on a dedicated connection
// for as long as it leads, and releases it right after its release or handover write
// returned. Each follower waits for that lock with GET_LOCK on a dedicated connection
// of its own; the server grants it the moment the leader releases it, or the moment a
// crashed leader's connection drops; the follower is woken and then releases the
// lock. A lock carries no version and cannot tell a release from a handover, so the
// wake-up says "perhaps handed over" ([HandedOver]): an elector whose process a
// handover can name (its members rows record its incarnation) reads the row, which
// may hand it the term; any other tries to win the row if it is released or handed
// over to its ID (one round trip), and reads it otherwise. A
// crashed leader's lease still has to expire in database time before anybody can
// take over: the wake-up only saves the poll. A
// lock granted at once (the new leader has not taken it yet, or runs without a
// notifier) is retried after a pause, and after a few such grants the follower stops
// waiting on that term. Lock names are "casleader:" + 32 hex digits of
// SHA-256(table, key) + ":" + term.
//
// On a Galera cluster named locks are local to a node. [MySQL] detects a Galera
// node, warns once, and has each follower also read the row every
// MySQLConfig.GaleraCheckInterval (1 s) while it waits, so a release on another node
// wakes it within that interval.
//
// Connections: one per process for the locks held, plus one per key followed (up to
// MySQLConfig.MaxWaiters), taken from the pool. The store's built-in one uses the
// store's pool and waits on at most half of it; give the store a small pool of
// its own (mysql.WakePool) to wait on more keys.
//
// # SQLite: a watched file
//
// A release by a sqlite.Store appends "table version key" to the file named after
// the database file plus "-casleader", and the stores of other processes
// on the same file watch it (through fsnotify).
package notify
