package cas

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/notify"
	"github.com/casleader/casleader/internal/rules"
	"github.com/casleader/casleader/internal/timing"
	"github.com/casleader/casleader/store"
)

// The machine reads the versions of package internal/notify's wake-ups without
// importing it.
func TestWakeUpVersionsAgreeWithNotify(t *testing.T) {
	assert.Equal(t, notify.HandedOver, handedOver)
	assert.Equal(t, notify.HandedToAnother, handedToAnother)
}

const (
	lease = 1000 * time.Millisecond
	renew = 600 * time.Millisecond
)

var t0 = time.Now()

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func row(version int64, leader string, term int64, age time.Duration) store.Record {
	return store.Record{Key: "k", Version: version, LeaderID: leader, Term: term, Age: age}
}

// mine marks rec as written by this process ("me", whose incarnation is "inc-me"),
// and other by another process with an incarnation of its own.
func mine(rec store.Record) store.Record  { rec.Incarnation = "inc-me"; return rec }
func other(rec store.Record) store.Record { rec.Incarnation = "inc-other"; return rec }

// won is the term that the election in leading wins. Terms come from the store
// (microseconds since the Unix epoch by the database clock, or more); the machine
// only compares them.
const won int64 = 1_700_000_000_000_000

// leading returns a machine that won term won in an election from version 4 at t0.
func leading(t *testing.T) *Machine {
	t.Helper()
	m := New(store.Candidate{ID: "me", Incarnation: "inc-" + "me", Lease: lease}, renew)
	// The first read of a term only sets what the lease's age is measured from
	// (skew.go); a lease later read to have run a whole lease since is expired.
	d := m.Observed(row(4, "old", 2, 2*lease), true, at(-1000), Campaigning)
	require.Equal(t, Decision{Action: Wait, Wait: lease}, d)
	d = m.Observed(row(4, "old", 2, 3*lease), true, at(0), Campaigning)
	require.Equal(t, Decision{Action: Campaign, Version: 4}, d)
	d = m.Elected(won, true, at(0))
	require.Equal(t, Decision{Action: Lead, Version: won}, d)
	return m
}

func TestObserved(t *testing.T) {
	tests := []struct {
		name  string
		rec   store.Record
		found bool
		p     Participation
		want  Decision
		role  role
	}{
		{"MissingRowIsCreated", store.Record{}, false, Campaigning, Decision{Action: Create}, candidate},
		{"MissingRowWaitsWhenNotCampaigning", store.Record{}, false, Abstaining, Decision{Action: Wait, Wait: lease}, follower},
		// The first read of a term measures nothing yet: its age may be inflated by
		// the skew between the server that wrote it and the one read (skew.go), so
		// it waits a whole lease, live or expired, unless it is older than any
		// supported skew.
		{"FirstReadOfALiveLeaseWaitsAWholeLease", row(7, "other", 3, 300*time.Millisecond), true, Campaigning, Decision{Action: Wait, Wait: lease}, follower},
		{"FirstReadOfAnExpiredLeaseWaitsAWholeLease", row(7, "other", 3, lease), true, Campaigning, Decision{Action: Wait, Wait: lease}, follower},
		{"LeaseExpiredBeyondAnySupportedSkewIsContested", row(7, "other", 3, lease+rules.FutureTolerance), true, Campaigning, Decision{Action: Campaign, Version: 7}, candidate},
		{"ReleasedLeaseIsContestedAtOnce", row(7, "", 3, 0), true, Campaigning, Decision{Action: Campaign, Version: 7}, candidate},
		{"PausedCandidateNeverContests", row(7, "", 3, 0), true, Abstaining, Decision{Action: Wait, Wait: lease}, follower},
		// A fresh machine owns no term: a live lease naming its ID on the first read
		// is another process's (same ID) or an earlier run's, never adopted.
		{"OwnIDInATermNeverWonIsNotAdopted", row(7, "me", 7, 100*time.Millisecond), true, Campaigning, Decision{Action: Wait, Wait: lease}, follower},
		{"OwnIDInATermNeverWonIsNotAdoptedWhileCoolingDown", row(7, "me", 7, 100*time.Millisecond), true, CoolingDown, Decision{Action: Wait, Wait: lease}, follower},
		{"OwnStaleLeaseIsTreatedLikeAnybodys", row(7, "me", 7, 700*time.Millisecond), true, Campaigning, Decision{Action: Wait, Wait: lease}, follower},
		{"OwnLeaseIsNotAdoptedWhilePaused", row(7, "me", 7, 100*time.Millisecond), true, Abstaining, Decision{Action: Wait, Wait: lease}, follower},
		{"FreeLeaseIsNotTakenWhileCoolingDown", row(7, "", 3, 0), true, CoolingDown, Decision{Action: Wait, Wait: lease}, follower},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New(store.Candidate{ID: "me", Incarnation: "inc-" + "me", Lease: lease}, renew)
			got := m.Observed(tt.rec, tt.found, at(0), tt.p)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.role, m.role)
			assert.Equal(t, tt.rec.LeaderID, m.Leader())
		})
	}
}

func TestAdoptedLeaseIsTrustedUntilSendPlusRenewMinusAge(t *testing.T) {
	m := New(store.Candidate{ID: "me", Incarnation: "inc-" + "me", Lease: lease}, renew)
	m.Observed(mine(row(7, "me", 7, 100*time.Millisecond)), true, at(50), Campaigning)
	assert.Equal(t, at(50+600-100), m.Deadline())
	assert.Equal(t, int64(7), m.Term())
}

func TestElectionWonMakesTheReturnedTermTheTokenAndVersion(t *testing.T) {
	m := leading(t)
	assert.Equal(t, leader, m.role)
	assert.Equal(t, won, m.Term())
	assert.Equal(t, won, m.Version())
	assert.Equal(t, at(600), m.Deadline(), "trust runs from the election's send time")
	assert.True(t, m.Trusted(at(599)))
	assert.False(t, m.Trusted(at(600)), "trust ends exactly at the deadline")
}

func TestElectionLostGoesBackToFollowing(t *testing.T) {
	m := New(store.Candidate{ID: "me", Incarnation: "inc-" + "me", Lease: lease}, renew)
	m.Observed(row(4, "", 2, 0), true, at(0), Campaigning)
	assert.Equal(t, Decision{Action: Wait}, m.Elected(0, false, at(0)))
	assert.Equal(t, follower, m.role)
	assert.Zero(t, m.Term())
	assert.False(t, m.Trusted(at(1)))
}

func TestCreatedLeadsInTheInsertedTerm(t *testing.T) {
	m := New(store.Candidate{ID: "me", Incarnation: "inc-" + "me", Lease: lease}, renew)
	require.Equal(t, Decision{Action: Create}, m.Observed(store.Record{}, false, at(0), Campaigning))
	assert.Equal(t, Decision{Action: Lead, Version: won}, m.Created(won, true, at(10)))
	assert.Equal(t, won, m.Term())
	assert.Equal(t, won, m.Version())
	assert.Equal(t, at(610), m.Deadline())

	m = New(store.Candidate{ID: "me", Incarnation: "inc-" + "me", Lease: lease}, renew)
	m.Observed(store.Record{}, false, at(0), Campaigning)
	assert.Equal(t, Decision{Action: Wait}, m.Created(0, false, at(10)))
	assert.Equal(t, follower, m.role)
	assert.Zero(t, m.Term())
}

func TestUnsettledElectionIsSettledByTheNextRead(t *testing.T) {
	m := New(store.Candidate{ID: "me", Incarnation: "inc-" + "me", Lease: lease}, renew)
	m.Observed(row(4, "", 2, 0), true, at(0), Campaigning)
	assert.Equal(t, Decision{Action: Wait}, m.Unsettled())
	assert.False(t, m.Trusted(at(1)), "an election with a lost reply gives no trust")
	// The write had committed: the next read shows our lease in the term it started.
	d := m.Observed(mine(row(won, "me", won, 30*time.Millisecond)), true, at(40), Campaigning)
	assert.Equal(t, Decision{Action: Lead, Version: won}, d)
	assert.Equal(t, won, m.Term())
	assert.Equal(t, at(40+600-30), m.Deadline())
}

func TestRenewedExtendsTrustFromSendTime(t *testing.T) {
	m := leading(t)
	assert.Equal(t, at(800), m.Renewed(won+1, at(200)))
	assert.Equal(t, won+1, m.Version())
	assert.Equal(t, won, m.Term(), "renewals keep the term")
	// A renewal sent earlier but answered later never moves the deadline back.
	assert.Equal(t, at(800), m.Renewed(won+2, at(100)))
}

func TestSlowRenewalDoesNotExtendTrustPastItsSendTime(t *testing.T) {
	m := leading(t)
	// Sent at 500, answered at 1100 (after the deadline at 600): trust is 500+600.
	m.Renewed(won+1, at(500))
	assert.Equal(t, at(1100), m.Deadline())
	assert.False(t, m.Trusted(at(1100)))
}

func TestRenewalFailedKeepsTheDeadline(t *testing.T) {
	m := leading(t)
	m.RenewalFailed(true)
	assert.Equal(t, at(600), m.Deadline(), "a failed renewal keeps the old deadline")
	assert.True(t, m.Leading(), "a failed renewal is settled by a read, not by stepping down")
}

func TestSettled(t *testing.T) {
	tests := []struct {
		name string
		rec  store.Record
		want Decision
		role role
	}{
		{"AmbiguousCommitIsSettledByOneRead", row(won+1, "me", won, 20*time.Millisecond), Decision{Action: Lead, Version: won + 1}, leader},
		{"TakenOverLeaseStepsDown", row(won+500, "other", won+500, 0), Decision{Action: StepDown}, follower},
		{"ReleasedRowStepsDown", row(won+1, "", won, 0), Decision{Action: StepDown}, follower},
		{"SameIDInAnExpiredTermNotWonStepsDown", row(won+9, "me", won+8, lease), Decision{Action: StepDown}, follower},
		{"RolledBackRowOfAnotherTermStepsDown", row(3, "old", 2, 0), Decision{Action: StepDown}, follower},
		{"RolledBackRowOfOursWithAnEarlierTermStepsDown", row(3, "me", 2, 0), Decision{Action: StepDown}, follower},
		{"ResignRequestReleases", func() store.Record { r := row(won+1, "me", won, 0); r.StepDown = true; return r }(), Decision{Action: Release, Version: won + 1}, leader},
		{"HandoverRequestHandsOver", func() store.Record {
			r := row(won+1, "me", won, 0)
			r.StepDown, r.HandoverTo = true, "next"
			return r
		}(), Decision{Action: Handover, Version: won + 1, To: "next"}, leader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := leading(t)
			m.RenewalFailed(true)
			assert.Equal(t, tt.want, m.Settled(tt.rec, true, at(100)))
			assert.Equal(t, tt.role, m.role)
			if tt.role == follower {
				assert.False(t, m.Trusted(at(101)), "stepping down ends trust at once")
				assert.Zero(t, m.Term())
			}
		})
	}
	t.Run("MissingRowStepsDown", func(t *testing.T) {
		m := leading(t)
		assert.Equal(t, Decision{Action: StepDown}, m.Settled(store.Record{}, false, at(100)))
	})
	t.Run("SettlingReadExtendsTrustFromItsSendTimeMinusAge", func(t *testing.T) {
		m := leading(t)
		m.RenewalFailed(true)
		m.Settled(row(won+1, "me", won, 50*time.Millisecond), true, at(300))
		assert.Equal(t, at(300+600-50), m.Deadline())
	})
	t.Run("OldSettlingReadNeverShortensTrust", func(t *testing.T) {
		m := leading(t)
		m.RenewalFailed(true)
		m.Settled(row(won+1, "me", won, 500*time.Millisecond), true, at(100))
		assert.Equal(t, at(600), m.Deadline())
	})
}

// TestAnotherProcessWithOurIDIsRefused specifies the leader's side of the
// duplicate-ID rule: a settling read that shows this candidate's ID in a live term
// it did not win, or its own term renewed by somebody else, ends the term without a
// release (Refuse, with an error naming the key and the ID). Both executors stop on
// it; neither acts on such a term.
func TestAnotherProcessWithOurIDIsRefused(t *testing.T) {
	tests := []struct {
		name   string
		before func(m *Machine) // how the renewals of the term went before the read
		rec    store.Record
		want   Decision
	}{
		{"LiveTermNotWonUnderOurIDIsRefused", func(m *Machine) { m.RenewalFailed(false) },
			other(row(won+9, "me", won+8, 0)), Decision{Action: Refuse}},
		{"LiveTermNotWonIsRefusedEvenAfterAnAmbiguousRenewal", func(m *Machine) { m.RenewalFailed(true) },
			other(row(won+9, "me", won+8, 0)), Decision{Action: Refuse}},
		{"NewerTermHandedToOurIDStepsDown", func(m *Machine) { m.RenewalFailed(false) },
			handedTo(row(won+9, "me", won+8, 0), "me"), Decision{Action: StepDown}},
		{"OurTermBumpedByAnOutsideWriteStepsDown", func(m *Machine) { m.RenewalFailed(false) },
			mine(row(won+1, "me", won, 0)), Decision{Action: StepDown, Err: errOutsideWrite}},
		{"OurTermAtAHigherVersionAfterAnAmbiguousRenewalIsAdopted", func(m *Machine) {
			m.RenewalFailed(true) // this one may have committed unseen
			m.RenewalFailed(false)
		}, row(won+1, "me", won, 0), Decision{Action: Lead, Version: won + 1}},
		{"AmbiguityEndsWithTheNextRenewalThatWins", func(m *Machine) {
			m.RenewalFailed(true)
			m.RenewReply(won+1, at(100), at(110))
			m.RenewalFailed(false)
		}, mine(row(won+2, "me", won, 0)), Decision{Action: StepDown, Err: errOutsideWrite}},
		{"AStepDownRequestIsNoDuplicate", func(m *Machine) { m.RenewalFailed(false) },
			stepDown(row(won+1, "me", won, 0)), Decision{Action: Release, Version: won + 1}},
		{"AHandoverToUsIsNoDuplicate", func(m *Machine) { m.RenewalFailed(false) },
			stepDown(handedTo(row(won+1, "me", won, 0), "me")), Decision{Action: Lead, Version: won + 1}},
		{"AReleasedRowUnderOurIDIsNoDuplicate", func(m *Machine) { m.RenewalFailed(false) },
			row(won+9, "", won+8, 0), Decision{Action: StepDown}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := leading(t)
			tt.before(m)
			got := m.Settled(tt.rec, true, at(200))
			assert.Equal(t, tt.want.Action, got.Action)
			if tt.want.Err != nil {
				require.ErrorIs(t, got.Err, tt.want.Err)
				assert.Contains(t, got.Err.Error(), `key "k"`)
				assert.False(t, m.Trusted(at(201)))
				return
			}
			if tt.want.Action != Refuse {
				assert.Equal(t, tt.want, got)
				return
			}
			require.ErrorIs(t, got.Err, ErrDuplicateID)
			assert.Contains(t, got.Err.Error(), `key "k"`)
			assert.Contains(t, got.Err.Error(), `ID "me"`)
			assert.Equal(t, follower, m.role, "a refused term is not led")
			assert.False(t, m.Trusted(at(201)))
			assert.Zero(t, m.Term())
			_, held := m.Resign()
			assert.False(t, held, "nothing is left to release: the lease is the other process's too")
		})
	}
	t.Run("TheLateReplyRuleComesFirst", func(t *testing.T) {
		m := leading(t)
		m.RenewalFailed(false)
		assert.Equal(t, Decision{Action: StepDown}, m.SettledAt(row(won+1, "me", won, 0), true, at(200), at(600)))
	})
}

// TestForeignTermRenewedIsRefused specifies the follower's side: a live lease under
// this candidate's ID in a term it does not own is first only reported (Foreign);
// read again at a higher version with no step-down request, it is being renewed by
// another live process with this ID, and the machine refuses.
func TestForeignTermRenewedIsRefused(t *testing.T) {
	const fresh = 100 * time.Millisecond
	tests := []struct {
		name   string
		second store.Record
		p      Participation
		want   Action
	}{
		{"RenewedForeignTermIsRefused", row(won+1, "me", won, fresh), Campaigning, Refuse},
		{"RenewedForeignTermIsRefusedWhileCoolingDown", row(won+1, "me", won, fresh), CoolingDown, Refuse},
		{"RenewedForeignTermIsRefusedWhilePaused", row(won+1, "me", won, fresh), Abstaining, Refuse},
		{"AnObserverSharesIDsFreely", row(won+1, "me", won, fresh), Observing, Wait},
		{"ALeaseThatIsNotRenewedIsLeftToExpire", row(won, "me", won, 500*time.Millisecond), Campaigning, Wait},
		{"AnExpiredForeignTermIsContested", row(won, "me", won, lease+fresh), Campaigning, Campaign}, // a full lease since the fresh read (skew.go)
		// Renewed after the first read, so live until at least a lease after it,
		// whatever its age says (a clock step back, a hand edit).
		{"ARenewedTermIsNotExpiredByItsAge", row(won+1, "me", won, lease+fresh), Campaigning, Wait},
		{"AStepDownRequestIsNoRenewal", stepDown(row(won+1, "me", won, fresh)), Campaigning, Wait},
		{"AnotherForeignTermStartsOver", row(won+5, "me", won+5, fresh), Campaigning, Wait},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New(store.Candidate{ID: "me", Incarnation: "inc-" + "me", Lease: lease}, renew)
			first := m.Observed(row(won, "me", won, fresh), true, at(0), tt.p)
			require.Equal(t, Wait, first.Action)
			require.NoError(t, first.Err)
			got := m.Observed(tt.second, true, at(400), tt.p)
			assert.Equal(t, tt.want, got.Action)
			if tt.want == Refuse {
				require.ErrorIs(t, got.Err, ErrDuplicateID)
				assert.Contains(t, got.Err.Error(), `ID "me"`)
			} else {
				assert.NoError(t, got.Err)
			}
			assert.Zero(t, m.Term(), "never a token from a term not owned")
		})
	}
}

// TestElectionWonWithoutANewTermIsNotLed: a store that reports a write won must
// report the new term, above the version the write was sent from (the term is the
// row's next version). Otherwise the machine does not lead: it reports the fault
// (errNoNewTerm) and lets the next read settle the write, as for a lost reply.
func TestElectionWonWithoutANewTermIsNotLed(t *testing.T) {
	t.Run("Election", func(t *testing.T) {
		m := New(store.Candidate{ID: "me", Incarnation: "inc-" + "me", Lease: lease}, renew)
		require.Equal(t, Decision{Action: Campaign, Version: 4}, m.Observed(row(4, "", 2, 0), true, at(0), Campaigning))
		d := m.Elected(4, true, at(0))
		assert.Equal(t, Wait, d.Action)
		require.ErrorIs(t, d.Err, errNoNewTerm)
		assert.Equal(t, follower, m.role)
		assert.False(t, m.Trusted(at(1)))
		// The write had committed: the next read shows the term it started.
		assert.Equal(t, Decision{Action: Lead, Version: won}, m.Observed(mine(row(won, "me", won, 0)), true, at(10), Campaigning))
	})
	t.Run("Creation", func(t *testing.T) {
		m := New(store.Candidate{ID: "me", Incarnation: "inc-" + "me", Lease: lease}, renew)
		m.Observed(row(9, "", 8, 0), true, at(0), Abstaining) // a version seen before the row vanished
		require.Equal(t, Decision{Action: Create}, m.Observed(store.Record{}, false, at(0), Campaigning))
		d := m.Created(-1, true, at(0))
		assert.Equal(t, Wait, d.Action)
		require.ErrorIs(t, d.Err, errNoNewTerm)
		assert.Zero(t, m.Term())
	})
	t.Run("ANewTermIsLed", func(t *testing.T) {
		m := New(store.Candidate{ID: "me", Incarnation: "inc-" + "me", Lease: lease}, renew)
		m.Observed(row(4, "", 2, 0), true, at(0), Campaigning)
		assert.Equal(t, Decision{Action: Lead, Version: 5}, m.Elected(5, true, at(0)))
	})
}

func TestDeadlineExpiryWhileARenewalHangs(t *testing.T) {
	m := leading(t)
	// The renewal sent at 200 hangs; nothing is fed until the deadline passes.
	assert.Equal(t, Decision{Action: Lead, Version: won}, m.DeadlinePassed(at(599)))
	assert.Equal(t, Decision{Action: StepDown}, m.DeadlinePassed(at(600)))
	assert.False(t, m.Trusted(at(600)))
	// The hung renewal's late success must not revive leadership.
	assert.Equal(t, time.Time{}, m.Renewed(won+1, at(200)))
	assert.Equal(t, follower, m.role)
}

func TestResign(t *testing.T) {
	m := leading(t)
	v, ok := m.Resign()
	assert.True(t, ok)
	assert.Equal(t, won, v)
	assert.False(t, m.Trusted(at(1)), "resign stops acting before the release is sent")
	m.Released(v+1, true, "")
	assert.Equal(t, v+1, m.Version(), "a release moves the row to version+1")
	assert.Equal(t, "", m.Leader())

	_, ok = New(store.Candidate{ID: "me", Incarnation: "inc-" + "me", Lease: lease}, renew).Resign()
	assert.False(t, ok, "a follower has nothing to resign")
}

// TestResignedTermIsNeverLedAgain: after Resign the row may still show the term
// (its release waits for the leader's work to return, or failed). A read of it
// must not make the candidate lead it again, which would start the leader's work a
// second time in one term; nor is it reported as another process's term.
func TestResignedTermIsNeverLedAgain(t *testing.T) {
	for _, p := range []Participation{Campaigning, CoolingDown} {
		t.Run(p.String(), func(t *testing.T) {
			m := leading(t)
			_, ok := m.Resign()
			require.True(t, ok)
			d := m.Observed(row(won, "me", won, 10*time.Millisecond), true, at(20), p)
			// The first read of the term is its freshest: a full lease from it (skew.go).
			assert.Equal(t, Decision{Action: Wait, Wait: lease}, d)
			assert.Zero(t, m.Foreign(), "our own term, not another process's")
			assert.Zero(t, m.Term())
			// Once it has expired, a full lease after the fresh read (skew.go), it is
			// contested like any other.
			assert.Equal(t, Wait, m.Observed(row(won, "me", won, lease), true, at(1090), Campaigning).Action)
			assert.Equal(t, Campaign, m.Observed(row(won, "me", won, lease+10*time.Millisecond), true, at(1100), Campaigning).Action)
		})
	}
}

func TestResignWithHandoverRecordsTheNewTermAsVersion(t *testing.T) {
	m := leading(t)
	v, ok := m.Resign()
	require.True(t, ok)
	m.Released(v+1000, true, "next")
	assert.Equal(t, v+1000, m.Version(), "a handover moves the row to the term it starts")
	assert.Equal(t, "next", m.Leader())
	assert.Equal(t, follower, m.role)

	m = leading(t)
	v, _ = m.Resign()
	m.Released(v+1000, false, "next")
	assert.Equal(t, v, m.Version(), "a lost handover leaves the version")
}

// TestHandoverTargetClaimsTheLease: a lease handed to this candidate's ID is led
// only after an election of its own from the handed version wins it (a new term),
// so that of two processes that share the ID, one leads.
func TestHandoverTargetClaimsTheLease(t *testing.T) {
	m := New(store.Candidate{ID: "next", Incarnation: "inc-" + "next", Lease: lease}, renew)
	// It follows the live lease of the leader that then hands over to it.
	require.Equal(t, Decision{Action: Wait, Wait: lease}, m.Observed(row(4, "old", 3, 100*time.Millisecond), true, at(0), Campaigning))
	d := m.Observed(handedTo(row(won, "next", won, 10*time.Millisecond), "next"), true, at(200), Campaigning)
	assert.Equal(t, Decision{Action: Campaign, Version: won}, d)
	assert.False(t, m.Trusted(at(201)), "the handed term itself is never led")
	assert.Equal(t, Decision{Action: Lead, Version: won + 1}, m.Elected(won+1, true, at(210)))
	assert.Equal(t, won+1, m.Term())
	assert.Zero(t, m.Foreign())

	// The other process with the ID lost the claim: it sees the term the winner
	// started, and refuses once it is renewed.
	dup := New(store.Candidate{ID: "next", Incarnation: "inc-dup", Lease: lease}, renew)
	require.Equal(t, Campaign, dup.Observed(handedTo(row(won, "next", won, 10*time.Millisecond), "next"), true, at(200), Campaigning).Action)
	require.Equal(t, Decision{Action: Wait}, dup.Elected(0, false, at(210)))
	claimed := func(v int64) store.Record {
		rec := row(v, "next", won+1, 10*time.Millisecond)
		rec.Incarnation = "inc-next"
		return rec
	}
	assert.Equal(t, Wait, dup.Observed(claimed(won+1), true, at(220), Campaigning).Action)
	d = dup.Observed(claimed(won+2), true, at(400), Campaigning)
	assert.Equal(t, Refuse, d.Action)
	require.ErrorIs(t, d.Err, ErrDuplicateID)
	assert.Zero(t, dup.Term())
}

// A handover that names the target's incarnation hands the term to that process:
// it leads from its read, with no write, trusting until the read's send time plus
// its renew deadline less the age read (the handover's tick is its lease's start).
// Another process with the same ID reads a term it never held: it never leads it,
// and refuses once that term is renewed.
func TestHandoverToAnIncarnationIsLedFromTheRead(t *testing.T) {
	handed := func(v int64) store.Record {
		rec := row(v, "next", won, 30*time.Millisecond)
		rec.Incarnation = "inc-next"
		return rec
	}
	m := New(store.Candidate{ID: "next", Incarnation: "inc-" + "next", Lease: lease}, renew)
	m.ElectsReleased(true)
	m.Named(true)
	require.Equal(t, Decision{Action: Wait, Wait: lease}, m.Observed(row(4, "old", 3, 100*time.Millisecond), true, at(0), Campaigning))
	require.Equal(t, Decision{Action: Wait}, m.Woken(handedOver, Campaigning, 0), "the wake-up asks for a read, not a write")
	assert.Equal(t, Decision{Action: Lead, Version: won}, m.Observed(handed(won), true, at(200), Campaigning))
	assert.Equal(t, won, m.Term())
	assert.Equal(t, at(200+600-30), m.Deadline())
	assert.Equal(t, at(300+600), m.Renewed(won+1, at(300)), "renews from the version read")
	assert.Equal(t, won+1, m.Version())

	dup := New(store.Candidate{ID: "next", Incarnation: "inc-dup", Lease: lease}, renew)
	assert.Equal(t, Wait, dup.Observed(handed(won), true, at(200), Campaigning).Action)
	assert.False(t, dup.Trusted(at(201)))
	assert.Equal(t, won, dup.Foreign(), "a term under its ID that it never held")
	d := dup.Observed(handed(won+1), true, at(400), Campaigning)
	assert.Equal(t, Refuse, d.Action)
	require.ErrorIs(t, d.Err, ErrDuplicateID)
	assert.Zero(t, dup.Term())

	// A paused target, or one cooling down (it resigned a moment ago), takes it
	// too only when cooling down: a handover by name is what a cool-down waits for.
	paused := New(store.Candidate{ID: "next", Incarnation: "inc-" + "next", Lease: lease}, renew)
	assert.NotEqual(t, Lead, paused.Observed(handed(won), true, at(200), Abstaining).Action)
	cooling := New(store.Candidate{ID: "next", Incarnation: "inc-" + "next", Lease: lease}, renew)
	assert.Equal(t, Lead, cooling.Observed(handed(won), true, at(200), CoolingDown).Action)
}

func TestStrings(t *testing.T) {
	assert.Equal(t, "leader", leader.String())
	assert.Equal(t, "handover", Handover.String())
	assert.Equal(t, "invalid", Action(0).String())
	assert.Equal(t, "refuse", Refuse.String())
}

// TestOwnLeaseInATermBelowOneSeenBeforeIsNotAdopted covers rows rolled back by a
// database failover that lost writes: the row names this candidate with a fresh
// age, but its term is below a term the machine saw before (in a row, or won or
// handed over itself). Adopting it would revive a fencing token below a later one,
// so the row is handled like anybody's lease. An own fresh lease whose term is not
// below the highest seen is still adopted.
func TestOwnLeaseInATermBelowOneSeenBeforeIsNotAdopted(t *testing.T) {
	const fresh = 100 * time.Millisecond
	// How the machine saw a term before the read at at(1000); each returns it.
	sawOthersLease := func(m *Machine) int64 {
		m.Observed(row(won+1, "other", won, 0), true, at(0), Campaigning)
		return won
	}
	sawReleasedRow := func(m *Machine) int64 {
		m.Observed(row(won+1, "", won, 0), true, at(0), Abstaining)
		return won
	}
	wonThenLostTrust := func(m *Machine) int64 {
		m.Observed(row(4, "old", 2, 2*lease), true, at(0), Campaigning)
		m.Elected(won, true, at(0))
		m.DeadlinePassed(at(600))
		return won
	}
	createdThenLostTrust := func(m *Machine) int64 {
		m.Observed(store.Record{}, false, at(0), Campaigning)
		m.Created(won, true, at(0))
		m.DeadlinePassed(at(600))
		return won
	}
	handedOver := func(m *Machine) int64 {
		m.Observed(row(4, "old", 2, 2*lease), true, at(0), Campaigning)
		m.Elected(won, true, at(0))
		v, _ := m.Resign()
		m.Released(v+1000, true, "next")
		return won + 1000
	}
	handedOverThenFollowedTheTarget := func(m *Machine) int64 {
		h := handedOver(m)
		m.Observed(row(h, "next", h, 0), true, at(0), CoolingDown)
		return h
	}
	steppedDownOnSettle := func(m *Machine) int64 {
		m.Observed(row(4, "old", 2, 2*lease), true, at(0), Campaigning)
		m.Elected(won, true, at(0))
		m.RenewalFailed(true)
		m.Settled(row(won+2000, "other", won+2000, 0), true, at(100))
		return won + 2000
	}
	tests := []struct {
		name string
		saw  func(*Machine) int64
		rec  func(highest int64) store.Record
		p    Participation
		want func(highest int64) Decision
		role role
	}{
		{
			name: "RolledBackBelowOthersLeaseIsNotAdopted", saw: sawOthersLease,
			rec:  func(h int64) store.Record { return row(h-10, "me", h-10, fresh) },
			want: func(int64) Decision { return Decision{Action: Wait, Wait: lease} }, role: follower,
		},
		{
			name: "RolledBackBelowReleasedRowIsNotAdopted", saw: sawReleasedRow,
			rec:  func(h int64) store.Record { return row(h-10, "me", h-10, fresh) },
			want: func(int64) Decision { return Decision{Action: Wait, Wait: lease} }, role: follower,
		},
		{
			name: "RolledBackBelowOwnWonTermIsNotAdopted", saw: wonThenLostTrust,
			rec:  func(h int64) store.Record { return row(h-10, "me", h-10, fresh) },
			want: func(int64) Decision { return Decision{Action: Wait, Wait: lease} }, role: follower,
		},
		{
			name: "RolledBackBelowOwnInsertedTermIsNotAdopted", saw: createdThenLostTrust,
			rec:  func(h int64) store.Record { return row(h-10, "me", h-10, fresh) },
			want: func(int64) Decision { return Decision{Action: Wait, Wait: lease} }, role: follower,
		},
		{
			// The failover lost the handover: the row shows our lease in the term we
			// handed away from.
			name: "RolledBackBeforeOwnHandoverIsNotAdopted", saw: handedOver,
			rec:  func(h int64) store.Record { return row(won+1, "me", won, fresh) },
			want: func(int64) Decision { return Decision{Action: Wait, Wait: lease} }, role: follower,
		},
		{
			name: "RolledBackBelowTermSeenWhenSettlingIsNotAdopted", saw: steppedDownOnSettle,
			rec:  func(h int64) store.Record { return row(won+1, "me", won, fresh) },
			want: func(int64) Decision { return Decision{Action: Wait, Wait: lease} }, role: follower,
		},
		{
			name: "RolledBackLeaseHandedByNameIsNotAdoptedWhileCoolingDown", saw: sawOthersLease,
			rec:  func(h int64) store.Record { return row(h-10, "me", h-10, fresh) },
			p:    CoolingDown,
			want: func(int64) Decision { return Decision{Action: Wait, Wait: lease} }, role: follower,
		},
		{
			name: "ExpiredRolledBackLeaseIsStillContested", saw: wonThenLostTrust,
			rec:  func(h int64) store.Record { return row(h-10, "me", h-10, lease+rules.FutureTolerance) },
			want: func(h int64) Decision { return Decision{Action: Campaign, Version: h - 10} }, role: candidate,
		},
		{
			name: "ReleasedRolledBackRowIsStillContested", saw: sawOthersLease,
			rec:  func(h int64) store.Record { return row(h-10, "", h-10, 0) },
			want: func(h int64) Decision { return Decision{Action: Campaign, Version: h - 10} }, role: candidate,
		},
		{
			// A renewal that hung past the deadline but committed: same term as won.
			name: "OwnLeaseAtTheHighestTermSeenIsAdopted", saw: wonThenLostTrust,
			rec:  func(h int64) store.Record { return mine(row(h+1, "me", h, fresh)) },
			want: func(h int64) Decision { return Decision{Action: Lead, Version: h + 1} }, role: leader,
		},
		{
			name: "OwnLeaseAboveTheHighestTermSeenIsAdopted", saw: sawOthersLease,
			rec:  func(h int64) store.Record { return mine(row(h+1000, "me", h+1000, fresh)) },
			want: func(h int64) Decision { return Decision{Action: Lead, Version: h + 1000} }, role: leader,
		},
		{
			name: "LeaseHandedByNameAboveTheHighestTermSeenIsClaimedWhileCoolingDown", saw: handedOverThenFollowedTheTarget,
			rec:  func(h int64) store.Record { return handedTo(row(h+1000, "me", h+1000, fresh), "me") },
			p:    CoolingDown,
			want: func(h int64) Decision { return Decision{Action: Campaign, Version: h + 1000} }, role: candidate,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New(store.Candidate{ID: "me", Incarnation: "inc-" + "me", Lease: lease}, renew)
			highest := tt.saw(m)
			require.Equal(t, follower, m.role, "setup leaves a follower")
			rec := tt.rec(highest)
			assert.Equal(t, tt.want(highest), m.Observed(rec, true, at(1000), tt.p))
			assert.Equal(t, tt.role, m.role)
			assert.Equal(t, rec.LeaderID, m.Leader())
			if tt.role == leader {
				assert.Equal(t, rec.Term, m.Term(), "the adopted lease's term is the token")
				assert.Equal(t, at(1000+600-100), m.Deadline())
			} else {
				assert.Zero(t, m.Term(), "no token from a refused lease")
				assert.False(t, m.Trusted(at(1001)))
			}
		})
	}
}

func TestRolledBackOwnLeaseStaysRefusedUntilANewElectionWins(t *testing.T) {
	m := New(store.Candidate{ID: "me", Incarnation: "inc-" + "me", Lease: lease}, renew)
	m.Observed(row(won+1, "other", won, 0), true, at(0), Campaigning)
	rolledBack := row(won-10, "me", won-10, 100*time.Millisecond)

	// Reading the rolled-back row does not lower the highest term seen.
	for i, sent := range []int{1000, 1200} {
		d := m.Observed(rolledBack, true, at(sent), Campaigning)
		assert.Equal(t, Decision{Action: Wait, Wait: lease}, d, "read %d", i)
		assert.Equal(t, follower, m.role, "read %d", i)
	}

	// Once it expires (a lease after the first read), an election from its
	// version wins a new, higher term.
	rolledBack.Age = lease + 100*time.Millisecond
	require.Equal(t, Decision{Action: Campaign, Version: won - 10}, m.Observed(rolledBack, true, at(2000), Campaigning))
	assert.Equal(t, Decision{Action: Lead, Version: won + 5000}, m.Elected(won+5000, true, at(2000)))
	assert.Equal(t, won+5000, m.Term())
	assert.True(t, m.Trusted(at(2001)))
}

func TestRenewReply(t *testing.T) {
	tests := []struct {
		name     string
		sent     int // ms
		now      int // ms: when the reply is handled
		want     Decision
		role     role
		deadline time.Time
	}{
		{"ReplyInTimeExtendsTrustFromSendTime", 200, 300, Decision{Action: Lead, Version: won + 1}, leader, at(800)},
		{"ReplyJustBeforeTheDeadlineExtendsTrust", 500, 599, Decision{Action: Lead, Version: won + 1}, leader, at(1100)},
		// The renewal committed, but its reply came after IsLeader turned false: the
		// term is over, whatever the row says.
		{"LateReplyNeverRevivesTheTerm", 500, 610, Decision{Action: StepDown}, follower, time.Time{}},
		{"ReplyAtTheDeadlineEndsTheTerm", 500, 600, Decision{Action: StepDown}, follower, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := leading(t)
			assert.Equal(t, tt.want, m.RenewReply(won+1, at(tt.sent), at(tt.now)))
			assert.Equal(t, tt.role, m.role)
			assert.Equal(t, tt.deadline, m.Deadline())
			assert.Equal(t, won+1, m.Version(), "the row is at the renewal's version either way")
			if tt.role == follower {
				assert.Zero(t, m.Term())
				assert.False(t, m.Trusted(at(tt.now)))
			}
		})
	}
	t.Run("ReplyAfterAStepDownIsIgnored", func(t *testing.T) {
		m := leading(t)
		m.DeadlinePassed(at(600))
		assert.Equal(t, Decision{Action: Wait}, m.RenewReply(won+1, at(500), at(601)))
		assert.Equal(t, follower, m.role)
	})
}

func TestSettledAt(t *testing.T) {
	ours := row(won+1, "me", won, 20*time.Millisecond)
	t.Run("InTimeIsSettled", func(t *testing.T) {
		m := leading(t)
		m.RenewalFailed(true)
		assert.Equal(t, Decision{Action: Lead, Version: won + 1}, m.SettledAt(ours, true, at(500), at(550)))
		assert.Equal(t, at(500+600-20), m.Deadline())
	})
	t.Run("LateSettlingReadNeverRevivesTheTerm", func(t *testing.T) {
		m := leading(t)
		m.RenewalFailed(true)
		assert.Equal(t, Decision{Action: StepDown}, m.SettledAt(ours, true, at(500), at(600)))
		assert.Equal(t, follower, m.role)
		assert.Equal(t, won+1, m.Version())
		assert.False(t, m.Trusted(at(600)))
	})
}

func TestTick(t *testing.T) {
	tests := []struct {
		name string
		now  int
		p    Participation
		want Decision
		role role
	}{
		{"LeaderGoesOn", 100, Campaigning, Decision{Action: Lead, Version: won}, leader},
		{"LeaderCoolingDownGoesOn", 100, CoolingDown, Decision{Action: Lead, Version: won}, leader},
		{"PausedLeaderReleases", 100, Abstaining, Decision{Action: Release, Version: won}, leader},
		{"PassedDeadlineStepsDown", 600, Campaigning, Decision{Action: StepDown}, follower},
		{"PassedDeadlineStepsDownEvenWhenPaused", 600, Abstaining, Decision{Action: StepDown}, follower},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := leading(t)
			assert.Equal(t, tt.want, m.Tick(at(tt.now), tt.p))
			assert.Equal(t, tt.role, m.role)
		})
	}
	t.Run("FollowerWaits", func(t *testing.T) {
		assert.Equal(t, Decision{Action: Wait}, New(store.Candidate{ID: "me", Incarnation: "inc-" + "me", Lease: lease}, renew).Tick(at(0), Abstaining))
	})
}

func TestCoolDownAndParticipation(t *testing.T) {
	m := New(store.Candidate{ID: "me", Incarnation: "inc-" + "me", Lease: lease}, renew)
	assert.Equal(t, Campaigning, m.Participation(at(0), false, false))
	assert.Equal(t, Abstaining, m.Participation(at(0), true, false))
	assert.Equal(t, Observing, m.Participation(at(0), true, true), "an observer observes, paused or not")
	m.CoolDown(at(500))
	m.CoolDown(at(200)) // never shortens
	assert.Equal(t, CoolingDown, m.Participation(at(499), false, false))
	assert.Equal(t, Abstaining, m.Participation(at(499), true, false), "a pause outranks a cool-down")
	assert.Equal(t, Campaigning, m.Participation(at(500), false, false))
}

func TestYieldStopsActingAndCoolsDownForALease(t *testing.T) {
	m := leading(t)
	v, ok := m.Yield(at(100))
	require.True(t, ok)
	assert.Equal(t, won, v)
	assert.False(t, m.Trusted(at(101)), "stops acting before the write is sent")
	assert.Equal(t, CoolingDown, m.Participation(at(100+999), false, false))
	assert.Equal(t, Campaigning, m.Participation(at(100+1000), false, false))
	// While cooling down, a released row is not taken, a row handed back by name is.
	m.Released(v+1, true, "")
	assert.Equal(t, Decision{Action: Wait, Wait: lease}, m.Observed(row(v+1, "", won, 0), true, at(200), m.Participation(at(200), false, false)))

	_, ok = New(store.Candidate{ID: "me", Incarnation: "inc-" + "me", Lease: lease}, renew).Yield(at(0))
	assert.False(t, ok, "a follower has nothing to yield")
}

func TestRetryFrom(t *testing.T) {
	tests := []struct {
		name  string
		rec   store.Record
		found bool
		from  int64
		retry bool
	}{
		{"OwnRenewalCommittedUnseenIsRetriedFromTheRow", row(won+1, "me", won, 0), true, won + 1, true},
		{"StepDownRequestIsRetriedFromTheRow", func() store.Record { r := row(won+1, "me", won, 0); r.StepDown = true; return r }(), true, won + 1, true},
		{"TakenOverRowIsNotRetried", row(won+7, "other", won+7, 0), true, 0, false},
		{"ReleasedRowIsNotRetried", row(won+1, "", won, 0), true, 0, false},
		{"AnotherTermOfOursIsNotRetried", row(won+9, "me", won+8, 0), true, 0, false},
		{"SameVersionIsNotRetried", row(won, "me", won, 0), true, 0, false},
		{"MissingRowIsNotRetried", store.Record{}, false, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := leading(t)
			v, _ := m.Resign()
			from, retry := m.RetryFrom(won, v, tt.rec, tt.found)
			assert.Equal(t, tt.retry, retry)
			assert.Equal(t, tt.from, from)
		})
	}
	t.Run("LeaderDoesNotRetry", func(t *testing.T) {
		m := leading(t)
		_, retry := m.RetryFrom(won, won-1, row(won, "me", won, 0), true)
		assert.False(t, retry)
	})
}

// TestAdoptionOfAnOwnLease specifies which live leases naming this candidate it
// adopts: only terms it owns (won, settled after a lost reply, resumed, or handed
// to it by name while the previous leader's lease was live). Any other is handled
// like anybody's lease, reported by Foreign, and never acted on.
func TestAdoptionOfAnOwnLease(t *testing.T) {
	const fresh = 100 * time.Millisecond
	tests := []struct {
		name    string
		before  func(m *Machine) // what the machine did before the read at at(1000)
		rec     store.Record
		want    Decision
		foreign bool
	}{
		{
			name:   "NeverWonTermOnTheFirstReadIsRefusedAndReported",
			before: func(*Machine) {},
			rec:    row(won, "me", won, fresh), want: Decision{Action: Wait, Wait: lease}, foreign: true,
		},
		{
			name: "WonTermIsAdopted", // a renewal that committed after the trust deadline
			before: func(m *Machine) {
				m.Observed(row(4, "old", 2, 2*lease), true, at(0), Campaigning)
				m.Elected(won, true, at(0))
				m.DeadlinePassed(at(600))
			},
			rec: mine(row(won+1, "me", won, fresh)), want: Decision{Action: Lead, Version: won + 1},
		},
		{
			name: "ElectionWithALostReplyIsAdopted",
			before: func(m *Machine) {
				m.Observed(row(4, "", 2, 0), true, at(900), Campaigning)
				m.Unsettled()
			},
			rec: mine(row(won, "me", won, fresh)), want: Decision{Action: Lead, Version: won},
		},
		{
			name: "ElectionOfAnotherProcessWithOurIDIsNotAdopted",
			before: func(m *Machine) {
				m.Observed(row(4, "", 2, 0), true, at(800), Campaigning)
				m.Unsettled()
				m.Observed(row(5, "", 2, 0), true, at(900), Abstaining)
			},
			rec: row(won, "me", won, fresh), want: Decision{Action: Wait, Wait: lease}, foreign: true,
		},
		{
			// Led once a renewal from the version read confirms it (see
			// TestResumedTermIsConfirmedByARenewal).
			name:   "ResumedTermIsConfirmed",
			before: func(m *Machine) { m.Resume(won) },
			rec:    row(won+7, "me", won, fresh), want: Decision{Action: Confirm, Version: won + 7},
		},
		{
			name:   "AnotherTermThanTheResumedOneIsRefused",
			before: func(m *Machine) { m.Resume(won - 1) },
			rec:    row(won, "me", won, fresh), want: Decision{Action: Wait, Wait: lease}, foreign: true,
		},
		{
			name: "LeaseHandedByNameWhileThePreviousWasLiveIsClaimed",
			before: func(m *Machine) {
				m.Observed(row(won-5, "old", won-9, 300*time.Millisecond), true, at(500), Campaigning)
			},
			rec: handedTo(row(won, "me", won, fresh), "me"), want: Decision{Action: Campaign, Version: won},
		},
		{
			// The edited row: the old leader's term under this ID.
			name:   "OldLeadersTermUnderOurIDIsRefused",
			before: func(m *Machine) { m.Observed(row(won, "old", won, 0), true, at(900), Campaigning) },
			rec:    row(won+1, "me", won, fresh), want: Decision{Action: Wait, Wait: lease - fresh}, foreign: true,
		},
		{
			// The previous lease could have expired before this term was written:
			// another process with our ID may have won it in an election.
			name:   "NewTermWrittenAfterThePreviousLeaseCouldExpireIsRefused",
			before: func(m *Machine) { m.Observed(row(won-5, "old", won-9, 700*time.Millisecond), true, at(0), Campaigning) },
			rec:    row(won, "me", won, fresh), want: Decision{Action: Wait, Wait: lease}, foreign: true,
		},
		{
			name: "OwnTermWithAStepDownRequestIsNotLedAgain",
			before: func(m *Machine) {
				m.Observed(row(4, "old", 2, 2*lease), true, at(0), Campaigning)
				m.Elected(won, true, at(0))
				m.DeadlinePassed(at(600))
			},
			rec: stepDown(row(won+1, "me", won, fresh)), want: Decision{Action: Wait, Wait: lease},
		},
		{
			// The handover statement names its target in handover_to: the target
			// adopts the term even if it never read the previous leader's lease.
			name:   "HandoverNamingUsIsClaimedWithoutSeeingThePreviousLease",
			before: func(m *Machine) { m.Observed(row(won-5, "", won-9, 0), true, at(900), Abstaining) },
			rec:    handedTo(row(won, "me", won, fresh), "me"), want: Decision{Action: Campaign, Version: won},
		},
		{
			name:   "NewTermAfterAReleasedRowIsRefused",
			before: func(m *Machine) { m.Observed(row(won-5, "", won-9, 0), true, at(900), Abstaining) },
			rec:    row(won, "me", won, fresh), want: Decision{Action: Wait, Wait: lease}, foreign: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New(store.Candidate{ID: "me", Incarnation: "inc-" + "me", Lease: lease}, renew)
			tt.before(m)
			require.Equal(t, follower, m.role, "setup leaves a follower")
			assert.Equal(t, tt.want, m.Observed(tt.rec, true, at(1000), Campaigning))
			if tt.want.Action == Lead {
				assert.Equal(t, tt.rec.Term, m.Term())
				assert.Zero(t, m.Foreign())
			} else {
				assert.Zero(t, m.Term(), "never a token from a term not owned")
				assert.False(t, m.Trusted(at(1001)))
			}
			if tt.foreign {
				assert.Equal(t, tt.rec.Term, m.Foreign(), "the foreign term is reported")
			}
		})
	}
	t.Run("AdoptedTermStaysOwned", func(t *testing.T) {
		m := New(store.Candidate{ID: "me", Incarnation: "inc-" + "me", Lease: lease}, renew)
		m.Resume(won)
		require.Equal(t, Decision{Action: Confirm, Version: won}, m.Observed(row(won, "me", won, fresh), true, at(0), Campaigning))
		require.Equal(t, Decision{Action: Lead, Version: won + 1}, m.Confirmed(true, at(0)))
		m.DeadlinePassed(at(1000))
		assert.Equal(t, Decision{Action: Confirm, Version: won + 1}, m.Observed(row(won+1, "me", won, fresh), true, at(1000), Campaigning))
	})
	t.Run("ForeignIsClearedByTheNextRead", func(t *testing.T) {
		m := New(store.Candidate{ID: "me", Incarnation: "inc-" + "me", Lease: lease}, renew)
		m.Observed(row(won, "me", won, fresh), true, at(0), Campaigning)
		require.Equal(t, won, m.Foreign())
		m.Observed(row(won+1, "other", won+1, fresh), true, at(100), Campaigning)
		assert.Zero(t, m.Foreign())
	})
}

// handedTo marks rec as written by a handover to id.
func handedTo(rec store.Record, id string) store.Record {
	rec.HandoverTo = id
	return rec
}

// stepDown marks rec with a step-down request.
func stepDown(rec store.Record) store.Record {
	rec.StepDown = true
	return rec
}

// TestForeignSightingIsReportedOncePerTerm: the executors report a live lease
// under this candidate's ID in a term it does not own once per term, and never an
// expired one.
func TestForeignSightingIsReportedOncePerTerm(t *testing.T) {
	const fresh = 100 * time.Millisecond
	m := New(store.Candidate{ID: "me", Incarnation: "inc-" + "me", Lease: lease}, renew)
	first := row(won, "me", won, fresh)
	m.Observed(first, true, at(0), Campaigning)
	assert.Equal(t, won, m.ForeignSighting(first), "first sighting")
	m.Observed(first, true, at(100), Campaigning)
	assert.Zero(t, m.ForeignSighting(first), "the same term again")
	other := row(won+5, "me", won+5, fresh)
	m.Observed(other, true, at(200), Campaigning)
	assert.Equal(t, won+5, m.ForeignSighting(other), "another foreign term")

	expired := row(won+9, "me", won+9, 3*lease)
	m2 := New(store.Candidate{ID: "me", Incarnation: "inc-" + "me", Lease: lease}, renew)
	m2.Observed(expired, true, at(0), Campaigning)
	assert.Zero(t, m2.ForeignSighting(expired), "an expired lease is not reported")
	assert.Zero(t, New(store.Candidate{ID: "me", Incarnation: "inc-" + "me", Lease: lease}, renew).ForeignSighting(row(won, "other", won, fresh)), "no foreign term")
}

func TestWoken(t *testing.T) {
	live := row(10, "other", 9, 0)
	for _, tc := range []struct {
		name    string
		machine func(t *testing.T) *Machine
		version int64
		p       Participation
		want    Decision
		// failures counts the candidate's election writes in a row that failed
		// or lost.
		failures int
	}{
		{"ReleaseAboveTheVersionSeenIsElectedFromAtOnce", following(live), 11, Campaigning, Decision{Action: Campaign, Version: 11}, 0},
		{"FirstWakeUpBeforeAnyReadIsElectedFrom", func(*testing.T) *Machine {
			return New(store.Candidate{ID: "me", Incarnation: "inc-" + "me", Lease: lease}, renew)
		}, 11, Campaigning, Decision{Action: Campaign, Version: 11}, 0},
		{"WakeUpWithoutAVersionAsksForARead", following(live), 0, Campaigning, Decision{Action: Wait}, 0},
		{"ReleaseOfAVersionAlreadySeenAsksForARead", following(live), 10, Campaigning, Decision{Action: Wait}, 0},
		{"StaleReleaseAsksForARead", following(live), 7, Campaigning, Decision{Action: Wait}, 0},
		{"CoolingDownCandidateReads", following(live), 11, CoolingDown, Decision{Action: Wait}, 0},
		{"PausedCandidateReads", following(live), 11, Abstaining, Decision{Action: Wait}, 0},
		{"ObserverReads", following(live), 11, Observing, Decision{Action: Wait}, 0},
		{"LeaderIgnoresIt", leading, won + 1, Campaigning, Decision{Action: Wait}, 0},
		{"OneLostWriteStillElectsFromTheRelease", following(live), 11, Campaigning, Decision{Action: Campaign, Version: 11}, 1},
		{"WritesThatKeepLosingReadFirst", following(live), 11, Campaigning, Decision{Action: Wait}, 2},
		{"UnsettledElectionIsSettledByARead", func(t *testing.T) *Machine {
			m := following(row(10, "", 9, 0))(t)
			m.Unsettled()
			return m
		}, 11, Campaigning, Decision{Action: Wait}, 0},
		// A store with ElectReleased: a wake-up without a version is an election
		// of a released row, sent at once.
		{"WakeUpWithoutAVersionElectsAReleasedRowWhenTheStoreCan", electsReleased(following(live)), 0, Campaigning, Decision{Action: CampaignReleased, Version: 10}, 0},
		{"WakeUpWithoutAVersionBeforeAnyReadElectsAReleasedRow", electsReleased(func(*testing.T) *Machine {
			return New(store.Candidate{ID: "me", Incarnation: "inc-" + "me", Lease: lease}, renew)
		}), 0, Campaigning, Decision{Action: CampaignReleased}, 0},
		{"OneLostWriteStillElectsAReleasedRow", electsReleased(following(live)), 0, Campaigning, Decision{Action: CampaignReleased, Version: 10}, 1},
		{"ReleaseWithAVersionIsStillElectedFromIt", electsReleased(following(live)), 11, Campaigning, Decision{Action: Campaign, Version: 11}, 0},
		{"ReleaseOfAVersionAlreadySeenStillAsksForARead", electsReleased(following(live)), 10, Campaigning, Decision{Action: Wait}, 0},
		{"CoolingDownCandidateReadsAfterAWakeUpWithoutAVersion", electsReleased(following(live)), 0, CoolingDown, Decision{Action: Wait}, 0},
		{"PausedCandidateReadsAfterAWakeUpWithoutAVersion", electsReleased(following(live)), 0, Abstaining, Decision{Action: Wait}, 0},
		{"ObserverReadsAfterAWakeUpWithoutAVersion", electsReleased(following(live)), 0, Observing, Decision{Action: Wait}, 0},
		// A handover to this candidate, or to one not named (notify.HandedOver):
		// the election that wins a released row also claims a lease handed to
		// this candidate's ID, sent at once; without it, the target reads first.
		{"HandoverAsksForAReadWhenTheStoreCannotClaimWithoutAVersion", following(live), -1, Campaigning, Decision{Action: Wait}, 0},
		{"HandoverIsClaimedAtOnceWhenTheStoreCan", electsReleased(following(live)), -1, Campaigning, Decision{Action: CampaignReleased, Version: 10}, 0},
		{"HandoverBeforeAnyReadIsClaimedAtOnce", electsReleased(func(*testing.T) *Machine {
			return New(store.Candidate{ID: "me", Incarnation: "inc-" + "me", Lease: lease}, renew)
		}), -1, Campaigning, Decision{Action: CampaignReleased}, 0},
		// A candidate whose process a handover can name reads at once: the row
		// may hand the term to it (led from the read), and an election would
		// change nothing.
		{"HandoverToAProcessThatCanBeNamedAsksForARead", named(electsReleased(following(live))), -1, Campaigning, Decision{Action: Wait}, 0},
		{"WakeUpWithoutAVersionIsStillClaimedAtOnceByANamedProcess", named(electsReleased(following(live))), 0, Campaigning, Decision{Action: CampaignReleased, Version: 10}, 0},
		{"PausedTargetReadsAfterAHandover", electsReleased(following(live)), -1, Abstaining, Decision{Action: Wait}, 0},
		{"LeaderIgnoresAHandoverWakeUp", electsReleased(leading), -1, Campaigning, Decision{Action: Wait}, 0},
		{"HandoverClaimsThatKeepLosingReadFirst", electsReleased(following(live)), -1, Campaigning, Decision{Action: Wait}, 2},
		// A handover to another candidate (notify.HandedToAnother): a read a little
		// later, after the target's.
		{"HandoverToAnotherAsksForAReadAfterTheTargets", following(live), -2, Campaigning, Decision{Action: Wait, Wait: timing.HandoverReadDelay}, 0},
		{"HandoverToAnotherDelaysAnObserversReadToo", following(live), -2, Observing, Decision{Action: Wait, Wait: timing.HandoverReadDelay}, 0},
		{"LeaderReadsAtOnceWhenItsLeaseIsSaidHandedToAnother", electsReleased(leading), -2, Campaigning, Decision{Action: Wait}, 0},
		{"LeaderIgnoresAWakeUpWithoutAVersion", electsReleased(leading), 0, Campaigning, Decision{Action: Wait}, 0},
		{"ReleasedRowElectionsThatKeepLosingReadFirst", electsReleased(following(live)), 0, Campaigning, Decision{Action: Wait}, 2},
		{"UnsettledElectionIsSettledByAReadAfterAWakeUpWithoutAVersion", electsReleased(func(t *testing.T) *Machine {
			m := following(row(10, "", 9, 0))(t)
			m.Unsettled()
			return m
		}), 0, Campaigning, Decision{Action: Wait}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.machine(t)
			role, version := m.role, m.Version()
			d := m.Woken(tc.version, tc.p, tc.failures)
			assert.Equal(t, tc.want, d)
			if d.Action == Campaign {
				assert.Equal(t, candidate, m.role)
				assert.Equal(t, tc.version, m.Version())
				return
			}
			if d.Action == CampaignReleased {
				assert.Equal(t, candidate, m.role)
				assert.Equal(t, version, m.Version(), "the version is not known: the last one seen is kept")
				return
			}
			assert.Equal(t, role, m.role, "a read is asked for: the role is unchanged")
			assert.Equal(t, version, m.Version())
		})
	}
}

func TestWokenElectionIsSettledLikeAnyOther(t *testing.T) {
	// Won: the term is led from the write's send time.
	m := following(row(10, "other", 9, 0))(t)
	require.Equal(t, Decision{Action: Campaign, Version: 11}, m.Woken(11, Campaigning, 0))
	assert.Equal(t, Decision{Action: Lead, Version: won}, m.Elected(won, true, at(5)))
	assert.Equal(t, at(605), m.Deadline())

	// Lost (another follower won the race, or the notification was stale): back to
	// following, and the next read decides.
	m = following(row(10, "other", 9, 0))(t)
	m.Woken(11, Campaigning, 0)
	assert.Equal(t, Decision{Action: Wait}, m.Elected(0, false, at(5)))
	assert.Equal(t, follower, m.role)
	d := m.Observed(row(12, "rival", 12, 0), true, at(6), Campaigning)
	assert.Equal(t, Wait, d.Action)

	// A won reply without a term above the woken version is not led.
	m = following(row(10, "other", 9, 0))(t)
	m.Woken(11, Campaigning, 0)
	d = m.Elected(11, true, at(5))
	assert.ErrorIs(t, d.Err, errNoNewTerm)
	assert.Zero(t, m.Term())
}

func TestReleasedRowElectionIsSettledLikeAnyOther(t *testing.T) {
	m := electsReleased(following(row(10, "other", 9, 0)))(t)
	require.Equal(t, Decision{Action: CampaignReleased, Version: 10}, m.Woken(0, Campaigning, 0))
	assert.Equal(t, Decision{Action: Lead, Version: won}, m.Elected(won, true, at(5)))
	assert.Equal(t, won, m.Term())
	assert.Equal(t, at(605), m.Deadline(), "trusted from the write's send time")

	// Lost (the wake-up announced a handover, a lost connection, or another
	// follower won): back to following, and the next read decides.
	m = electsReleased(following(row(10, "other", 9, 0)))(t)
	m.Woken(0, Campaigning, 0)
	assert.Equal(t, Decision{Action: Wait}, m.Elected(0, false, at(5)))
	assert.Equal(t, follower, m.role)
	assert.Equal(t, Wait, m.Observed(row(10, "other", 9, 0), true, at(6), Campaigning).Action)

	// A won reply whose term is not above the last version seen is not led.
	m = electsReleased(following(row(10, "other", 9, 0)))(t)
	m.Woken(0, Campaigning, 0)
	d := m.Elected(10, true, at(5))
	assert.ErrorIs(t, d.Err, errNoNewTerm)
	assert.Zero(t, m.Term())
}

// electsReleased returns the machine of mk, told that its store has ElectReleased.
// named is mk's machine told that a handover can name its process.
func named(mk func(t *testing.T) *Machine) func(t *testing.T) *Machine {
	return func(t *testing.T) *Machine {
		m := mk(t)
		m.Named(true)
		return m
	}
}

func electsReleased(mk func(t *testing.T) *Machine) func(t *testing.T) *Machine {
	return func(t *testing.T) *Machine {
		m := mk(t)
		m.ElectsReleased(true)
		return m
	}
}

// following returns a machine that has read rec at t0 while campaigning.
func following(rec store.Record) func(t *testing.T) *Machine {
	return func(t *testing.T) *Machine {
		t.Helper()
		m := New(store.Candidate{ID: "me", Incarnation: "inc-" + "me", Lease: lease}, renew)
		d := m.Observed(rec, true, at(0), Campaigning)
		require.NotEqual(t, Lead, d.Action)
		if d.Action == Campaign {
			m.Elected(0, false, at(0)) // lost: a follower again
		}
		return m
	}
}

// TestLeaseIsJudgedByTheRowsLease: candidates of one key may run with different
// timings. A follower judges a lease by the one its leader runs with, as the row
// records it, never by its own; it says so once; and a leader that adopts a term
// whose row records a shorter lease than its own trusts it for that much less.
func TestLeaseIsJudgedByTheRowsLease(t *testing.T) {
	long := func(rec store.Record) store.Record { rec.Lease = 10 * lease; rec.OneClock = true; return rec }
	t.Run("ShortLeaseFollowerWaitsForTheLongLease", func(t *testing.T) {
		m := New(store.Candidate{ID: "me", Incarnation: "inc-me", Lease: lease}, renew)
		d := m.Observed(long(row(won, "old", won, 2*lease)), true, at(0), Campaigning)
		assert.Equal(t, Decision{Action: Wait, Wait: 8 * lease}, d, "its own lease is long over; the leader's is not")
		assert.Equal(t, 10*lease, m.LeaseSighting(long(row(won, "old", won, 2*lease))), "reported")
		assert.Zero(t, m.LeaseSighting(long(row(won+1, "old", won, 0))), "once")
		d = m.Observed(long(row(won, "old", won, 10*lease)), true, at(8000), Campaigning)
		assert.Equal(t, Decision{Action: Campaign, Version: won}, d, "after the leader's lease")
	})
	t.Run("LongLeaseFollowerTakesAShortLeaseAtItsExpiry", func(t *testing.T) {
		m := New(store.Candidate{ID: "me", Incarnation: "inc-me", Lease: 10 * lease}, renew)
		rec := row(won, "old", won, lease)
		rec.Lease, rec.OneClock = lease, true
		assert.Equal(t, Decision{Action: Campaign, Version: won}, m.Observed(rec, true, at(0), Campaigning))
	})
	t.Run("AdoptedTermWithAShorterLeaseIsTrustedLess", func(t *testing.T) {
		m := New(store.Candidate{ID: "me", Incarnation: "inc-me", Lease: 2 * lease}, 2*lease-400*time.Millisecond)
		m.Resume(won)
		rec := row(won+3, "me", won, 100*time.Millisecond)
		rec.Lease = lease // the earlier run's: 1 s
		require.Equal(t, Confirm, m.Observed(rec, true, at(0), Campaigning).Action)
		// Its own margin, L - R = 400 ms, kept below the row's lease: trust until
		// 600 ms after the renewal that confirmed it.
		require.Equal(t, Lead, m.Confirmed(true, at(10)).Action)
		assert.Equal(t, at(10+600), m.Deadline())
		assert.Equal(t, at(1000+600), m.Renewed(won+5, at(1000)), "and so for every renewal of the term")
	})
}

// TestExpiryOnOneClockIsTheAgeRead: on a single-primary database the age read is
// exact, and a crash failover follows the lease's expiry whatever the phase of the
// follower's reads; elsewhere (several servers' clocks) the freshest age read of
// the term is allowed for (skew.go).
func TestExpiryOnOneClockIsTheAgeRead(t *testing.T) {
	for _, oneClock := range []bool{true, false} {
		m := New(store.Candidate{ID: "me", Incarnation: "inc-me", Lease: lease}, renew)
		rec := func(v int64, age time.Duration) store.Record {
			r := row(v, "old", won, age)
			r.OneClock = oneClock
			return r
		}
		// The freshest read of the term came half a lease after a renewal.
		m.Observed(rec(won, 500*time.Millisecond), true, at(0), Campaigning)
		d := m.Observed(rec(won, 900*time.Millisecond), true, at(400), Campaigning)
		if oneClock {
			assert.Equal(t, Decision{Action: Wait, Wait: 100 * time.Millisecond}, d, "one clock: the lease has 100 ms left")
		} else {
			assert.Equal(t, Decision{Action: Wait, Wait: 600 * time.Millisecond}, d, "several clocks: a lease from the freshest read")
		}
	}
}

// TestTickTimeSteppedBackDoesNotExpireARenewedLease: a follower that saw the lease
// renewed (a higher version) after one of its reads knows the lease lives until a
// lease after that read, by its own monotonic clock. A tick_time that then reads
// old (the database clock stepped back, a hand edit) does not make it take over.
func TestTickTimeSteppedBackDoesNotExpireARenewedLease(t *testing.T) {
	m := New(store.Candidate{ID: "me", Incarnation: "inc-me", Lease: lease}, renew)
	rec := func(v int64, age time.Duration) store.Record {
		r := row(v, "old", won, age)
		r.OneClock = true
		return r
	}
	m.Observed(rec(won, 100*time.Millisecond), true, at(0), Campaigning)
	m.Observed(rec(won+1, 100*time.Millisecond), true, at(300), Campaigning)
	d := m.Observed(rec(won+1, 10*lease), true, at(500), Campaigning)
	assert.Equal(t, Decision{Action: Wait, Wait: 500 * time.Millisecond}, d, "renewed after the read at 0: live until 1000")
	d = m.Observed(rec(won+1, 10*lease), true, at(1000), Campaigning)
	assert.Equal(t, Decision{Action: Campaign, Version: won + 1}, d, "a lease after that read, it may have expired")
}

// TestResumedTermIsConfirmedByARenewal: a term resumed after a restart is led only
// once a renewal from the version read has won, trusted from that renewal's send:
// a release or handover that the earlier run sent before it crashed may execute
// after the read, and a renewal that lost (or whose outcome is unknown) leads to a
// read, never to leadership.
func TestResumedTermIsConfirmedByARenewal(t *testing.T) {
	const fresh = 100 * time.Millisecond
	newResumed := func() *Machine {
		m := New(store.Candidate{ID: "me", Incarnation: "inc-me", Lease: lease}, renew)
		m.Resume(won)
		return m
	}
	t.Run("NotTrustedBeforeTheRenewalWon", func(t *testing.T) {
		m := newResumed()
		require.Equal(t, Decision{Action: Confirm, Version: won + 2}, m.Observed(row(won+2, "me", won, fresh), true, at(0), Campaigning))
		assert.False(t, m.Leading())
		assert.False(t, m.Trusted(at(1)))
		assert.Zero(t, m.Term())
		assert.Equal(t, Decision{Action: Lead, Version: won + 3}, m.Confirmed(true, at(50)))
		assert.Equal(t, won, m.Term(), "the resumed term is the fencing token")
		assert.Equal(t, at(50).Add(renew), m.Deadline(), "trusted from the renewal's send")
	})
	t.Run("ARenewalThatLostLeadsToARead", func(t *testing.T) {
		m := newResumed()
		m.Observed(row(won+2, "me", won, fresh), true, at(0), Campaigning)
		assert.Equal(t, Decision{Action: Wait}, m.Confirmed(false, at(50)))
		assert.False(t, m.Leading())
		// The earlier run's handover executed: the row moved on to b.
		assert.Equal(t, Wait, m.Observed(handedTo(row(won+3, "b", won+3, fresh), "b"), true, at(100), Campaigning).Action)
		assert.Zero(t, m.Term())
	})
	t.Run("AnUnknownOutcomeIsSettledByTheNextRead", func(t *testing.T) {
		m := newResumed()
		m.Observed(row(won+2, "me", won, fresh), true, at(0), Campaigning)
		m.Unsettled()
		assert.False(t, m.Leading())
		assert.Equal(t, Decision{Action: Wait}, m.Confirmed(true, at(50)), "a reply after Unsettled confirms nothing")
		assert.Equal(t, Decision{Action: Confirm, Version: won + 3}, m.Observed(row(won+3, "me", won, fresh), true, at(100), Campaigning))
	})
	t.Run("OwnIncarnationIsLedFromTheRead", func(t *testing.T) {
		m := newResumed()
		rec := row(won+2, "me", won, fresh)
		rec.Incarnation = "inc-me"
		assert.Equal(t, Decision{Action: Lead, Version: won + 2}, m.Observed(rec, true, at(0), Campaigning))
	})
}
