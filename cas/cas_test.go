package cas

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/store"
)

const (
	lease = 1000 * time.Millisecond
	renew = 600 * time.Millisecond
)

var t0 = time.Now()

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func row(version int64, leader string, term int64, age time.Duration) store.Record {
	return store.Record{Key: "k", Version: version, LeaderID: leader, Term: term, Age: age}
}

// leading returns a machine that won an election from version 4 at t0.
func leading(t *testing.T) *Machine {
	t.Helper()
	m := New("me", lease, renew)
	d := m.Observed(row(4, "old", 2, 2*lease), true, at(0), Campaigning)
	require.Equal(t, Decision{Action: Campaign, Version: 4}, d)
	d = m.Elected(4, true, at(0))
	require.Equal(t, Decision{Action: Lead, Version: 5}, d)
	return m
}

func TestObserved(t *testing.T) {
	tests := []struct {
		name  string
		rec   store.Record
		found bool
		p     Participation
		want  Decision
		role  Role
	}{
		{"MissingRowIsCreated", store.Record{}, false, Campaigning, Decision{Action: Create}, Candidate},
		{"MissingRowWaitsWhenNotCampaigning", store.Record{}, false, Abstaining, Decision{Action: Wait, Wait: lease}, Follower},
		{"LiveLeaseWaitsForItsRemainder", row(7, "other", 3, 300*time.Millisecond), true, Campaigning, Decision{Action: Wait, Wait: 700 * time.Millisecond}, Follower},
		{"ExpiredLeaseIsContested", row(7, "other", 3, lease), true, Campaigning, Decision{Action: Campaign, Version: 7}, Candidate},
		{"ReleasedLeaseIsContestedAtOnce", row(7, "", 3, 0), true, Campaigning, Decision{Action: Campaign, Version: 7}, Candidate},
		{"PausedCandidateNeverContests", row(7, "", 3, 0), true, Abstaining, Decision{Action: Wait, Wait: lease}, Follower},
		{"OwnFreshLeaseIsAdopted", row(7, "me", 7, 100*time.Millisecond), true, Campaigning, Decision{Action: Lead, Version: 7}, Leader},
		{"OwnStaleLeaseIsTreatedLikeAnybodys", row(7, "me", 7, 700*time.Millisecond), true, Campaigning, Decision{Action: Wait, Wait: 300 * time.Millisecond}, Follower},
		{"OwnLeaseIsNotAdoptedWhilePaused", row(7, "me", 7, 100*time.Millisecond), true, Abstaining, Decision{Action: Wait, Wait: 900 * time.Millisecond}, Follower},
		{"HandedLeaseIsAdoptedWhileCoolingDown", row(7, "me", 7, 100*time.Millisecond), true, CoolingDown, Decision{Action: Lead, Version: 7}, Leader},
		{"FreeLeaseIsNotTakenWhileCoolingDown", row(7, "", 3, 0), true, CoolingDown, Decision{Action: Wait, Wait: lease}, Follower},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New("me", lease, renew)
			got := m.Observed(tt.rec, tt.found, at(0), tt.p)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.role, m.Role())
			assert.Equal(t, tt.rec.LeaderID, m.Leader())
		})
	}
}

func TestAdoptedLeaseIsTrustedUntilSendPlusRenewMinusAge(t *testing.T) {
	m := New("me", lease, renew)
	m.Observed(row(7, "me", 7, 100*time.Millisecond), true, at(50), Campaigning)
	assert.Equal(t, at(50+600-100), m.Deadline())
	assert.Equal(t, int64(7), m.Term())
}

func TestElectionWonMakesVersionPlusOneTheTerm(t *testing.T) {
	m := leading(t)
	assert.Equal(t, Leader, m.Role())
	assert.Equal(t, int64(5), m.Term())
	assert.Equal(t, int64(5), m.Version())
	assert.Equal(t, at(600), m.Deadline(), "trust runs from the election's send time")
	assert.True(t, m.Trusted(at(599)))
	assert.False(t, m.Trusted(at(600)), "trust ends exactly at the deadline")
}

func TestElectionLostGoesBackToFollowing(t *testing.T) {
	m := New("me", lease, renew)
	m.Observed(row(4, "", 2, 0), true, at(0), Campaigning)
	assert.Equal(t, Decision{Action: Wait}, m.Elected(4, false, at(0)))
	assert.Equal(t, Follower, m.Role())
	assert.Zero(t, m.Term())
	assert.False(t, m.Trusted(at(1)))
}

func TestCreated(t *testing.T) {
	m := New("me", lease, renew)
	require.Equal(t, Decision{Action: Create}, m.Observed(store.Record{}, false, at(0), Campaigning))
	assert.Equal(t, Decision{Action: Lead, Version: 1}, m.Created(true, at(10)))
	assert.Equal(t, int64(1), m.Term())
	assert.Equal(t, at(610), m.Deadline())

	m = New("me", lease, renew)
	m.Observed(store.Record{}, false, at(0), Campaigning)
	assert.Equal(t, Decision{Action: Wait}, m.Created(false, at(10)))
	assert.Equal(t, Follower, m.Role())
}

func TestUnsettledElectionIsSettledByTheNextRead(t *testing.T) {
	m := New("me", lease, renew)
	m.Observed(row(4, "", 2, 0), true, at(0), Campaigning)
	assert.Equal(t, Decision{Action: Wait}, m.Unsettled())
	assert.False(t, m.Trusted(at(1)), "an election with a lost reply gives no trust")
	// The write had committed: the next read shows our lease with term 5.
	d := m.Observed(row(5, "me", 5, 30*time.Millisecond), true, at(40), Campaigning)
	assert.Equal(t, Decision{Action: Lead, Version: 5}, d)
	assert.Equal(t, at(40+600-30), m.Deadline())
}

func TestRenewedExtendsTrustFromSendTime(t *testing.T) {
	m := leading(t)
	assert.Equal(t, at(800), m.Renewed(6, at(200)))
	assert.Equal(t, int64(6), m.Version())
	assert.Equal(t, int64(5), m.Term(), "renewals keep the term")
	// A renewal sent earlier but answered later never moves the deadline back.
	assert.Equal(t, at(800), m.Renewed(7, at(100)))
}

func TestSlowRenewalDoesNotExtendTrustPastItsSendTime(t *testing.T) {
	m := leading(t)
	// Sent at 500, answered at 1100 (after the deadline at 600): trust is 500+600.
	m.Renewed(6, at(500))
	assert.Equal(t, at(1100), m.Deadline())
	assert.False(t, m.Trusted(at(1100)))
}

func TestRenewalFailedAsksForOneSettlingRead(t *testing.T) {
	m := leading(t)
	assert.Equal(t, Decision{Action: Settle, Version: 5}, m.RenewalFailed())
	assert.Equal(t, at(600), m.Deadline(), "a failed renewal keeps the old deadline")
}

func TestSettled(t *testing.T) {
	tests := []struct {
		name string
		rec  store.Record
		want Decision
		role Role
	}{
		{"AmbiguousCommitIsSettledByOneRead", row(6, "me", 5, 20*time.Millisecond), Decision{Action: Lead, Version: 6}, Leader},
		{"TakenOverLeaseStepsDown", row(7, "other", 7, 0), Decision{Action: StepDown}, Follower},
		{"ReleasedRowStepsDown", row(6, "", 5, 0), Decision{Action: StepDown}, Follower},
		{"SameIDWithAnotherTermStepsDown", row(9, "me", 8, 0), Decision{Action: StepDown}, Follower},
		{"RolledBackRowOfAnotherTermStepsDown", row(3, "old", 2, 0), Decision{Action: StepDown}, Follower},
		{"ResignRequestReleases", func() store.Record { r := row(6, "me", 5, 0); r.StepDown = true; return r }(), Decision{Action: Release, Version: 6}, Leader},
		{"HandoverRequestHandsOver", func() store.Record {
			r := row(6, "me", 5, 0)
			r.StepDown, r.HandoverTo = true, "next"
			return r
		}(), Decision{Action: Handover, Version: 6, To: "next"}, Leader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := leading(t)
			m.RenewalFailed()
			assert.Equal(t, tt.want, m.Settled(tt.rec, true, at(100)))
			assert.Equal(t, tt.role, m.Role())
			if tt.role == Follower {
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
		m.Settled(row(6, "me", 5, 50*time.Millisecond), true, at(300))
		assert.Equal(t, at(300+600-50), m.Deadline())
	})
	t.Run("OldSettlingReadNeverShortensTrust", func(t *testing.T) {
		m := leading(t)
		m.Settled(row(6, "me", 5, 500*time.Millisecond), true, at(100))
		assert.Equal(t, at(600), m.Deadline())
	})
}

func TestDeadlineExpiryWhileARenewalHangs(t *testing.T) {
	m := leading(t)
	// The renewal sent at 200 hangs; nothing is fed until the deadline passes.
	assert.Equal(t, Decision{Action: Lead, Version: 5}, m.DeadlinePassed(at(599)))
	assert.Equal(t, Decision{Action: StepDown}, m.DeadlinePassed(at(600)))
	assert.False(t, m.Trusted(at(600)))
	// The hung renewal's late success must not revive leadership.
	assert.Equal(t, time.Time{}, m.Renewed(6, at(200)))
	assert.Equal(t, Follower, m.Role())
}

func TestResign(t *testing.T) {
	m := leading(t)
	v, ok := m.Resign()
	assert.True(t, ok)
	assert.Equal(t, int64(5), v)
	assert.False(t, m.Trusted(at(1)), "resign stops acting before the release is sent")
	m.Released(v, true, "")
	assert.Equal(t, int64(6), m.Version())
	assert.Equal(t, "", m.Leader())

	_, ok = New("me", lease, renew).Resign()
	assert.False(t, ok, "a follower has nothing to resign")
}

func TestHandoverTargetAdoptsTheLease(t *testing.T) {
	m := New("next", lease, renew)
	d := m.Observed(row(6, "next", 6, 10*time.Millisecond), true, at(0), Campaigning)
	assert.Equal(t, Decision{Action: Lead, Version: 6}, d)
	assert.Equal(t, int64(6), m.Term())
}

func TestStrings(t *testing.T) {
	assert.Equal(t, "leader", Leader.String())
	assert.Equal(t, "handover", Handover.String())
	assert.Equal(t, "invalid", Action(0).String())
}
