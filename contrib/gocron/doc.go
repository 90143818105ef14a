// Package casgocron runs github.com/go-co-op/gocron/v2 jobs only on the casleader
// leader: [New] adapts a [Leader] (an [*casleader.Elector], a group's Lease, or a
// type of your own for single-instance deployments and tests) to gocron's
// distributed Elector interface. Every replica runs the same scheduler with the same
// jobs; at each run, gocron asks the elector, and only the replica that leads runs
// the job; the others skip that run.
//
// Import it under its package name (the directory is contrib/gocron):
//
//	import casgocron "github.com/casleader/casleader/contrib/gocron"
//
//	s, err := gocron.NewScheduler(gocron.WithDistributedElector(casgocron.New(el)))
//
// It lives in a module of its own so that the casleader module does not require
// gocron.
//
// # What is and is not promised
//
// Leadership is checked when a run starts, with [casleader.Elector.IsLeader], which
// costs no I/O and turns false at the leader's renew deadline. A run that started
// on the leader is not stopped when leadership is lost during the run: for jobs
// that must never overlap with a run on the next leader, keep them shorter than
// LeaseDuration - RenewDeadline, check IsLeader between steps, or fence their writes
// with the token read at the start of the run ([casleader.Elector.Token], strictly
// increasing from one leader to the next). A run that falls due while no replica
// leads (during a failover) is skipped, not delayed: gocron's distributed elector
// has no catch-up.
package casgocron
