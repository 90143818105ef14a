// Package modelcheck holds the exhaustive model checker of the election protocol,
// in its tests only: it drives the real per-key machine of package cas for two or
// three candidates against a model of the election row (a linearizable
// compare-and-set register with every column the protocol uses), and explores
// breadth-first, with state hashing, every interleaving of the statements' sends,
// executions and replies, lost requests and replies, late replies, time steps,
// clock drift, crashes and restarts, resigns, handovers, pauses, the leader's work
// and its drain, wake-ups and the environment's writes, within a budget; and
// checks that from every state reached a fault-free continuation elects a leader.
// See docs/SAFETY.md, "The model checker".
//
// The package has no code outside its tests: `go test ./internal/modelcheck` runs
// the check.
package modelcheck
