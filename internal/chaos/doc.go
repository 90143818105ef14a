// Package chaos is casleader's fault suite: the scenarios (its tests) that run
// the fault-injection harness and the history checker of package casleadertest,
// the race-test kit that users test their own leader code with, so that the kit
// is proven by the suite that proves the library. This package keeps the names
// the scenarios use ([Cluster], [Config], [Check], ...) as aliases of the kit's.
//
// A [Cluster] (casleadertest.ProcessCluster) runs candidates as separate OS processes (the test binary re-executed
// with [EnvChild] set; its TestMain calls [Child]), each talking to the database
// through its own TCP proxy (github.com/Shopify/toxiproxy/v2, in the parent process,
// on 127.0.0.1), so that a candidate can be killed (SIGKILL), frozen (SIGSTOP, then
// SIGCONT), cut off (a black hole), refused, slowed beyond the renew deadline, or have
// its connections reset as replies come back (the write committed, the reply was
// lost), alone or with other candidates; and the election row can be set back to an
// older version and tick_time with direct SQL (a failover that lost writes). With
// [Config.ClockOffsets], candidates run in time namespaces of their own whose
// monotonic and boot-time clocks are hours ahead of the host's.
//
// Each candidate runs either one casleader.Elector on one key or, with
// [Config.Keys], one group (package group) over many keys. A group's candidate is
// hit as a whole: faults target the candidate that leads the most keys, a rollback
// sets every row back to the same older snapshot, and the history is checked on
// each key by itself. With [Config.Balance] the groups are balanced ones, and
// RunBalanced (TestBalancedGroups) drives them through joins, graceful leaves,
// kills, pauses and cuts, and checks that the keys are spread fairly again after
// each.
//
// While a candidate believes it leads it performs fenced actions: a transaction that
// checks the elector's guard (a group's: its local check, then the store's guard) and
// inserts its key and token into an action table. For a while after it stopped
// leading it keeps trying, with the store's guard only and a context that leadership
// does not cancel, as a careless application would: the database must refuse those.
// A group's candidate runs two such writers, each picking a led or recently lost key
// at random. Each candidate reports its belief intervals (the first and last
// instant it saw IsLeader() true) to the parent over a pipe, stamped with the host's
// CLOCK_MONOTONIC (a candidate in a time namespace subtracts its offset from these
// stamps only); the parent stamps the faults with the same clock.
//
// [Check] then verifies the history, per key: fenced actions never go backwards in token
// (no excuse, not even a rolled-back row); belief intervals of different candidates
// never overlap (overlaps under a frozen process or a rolled-back row are reported
// apart); after every fault heals, a leader is back within lease + poll + slack.
package chaos
