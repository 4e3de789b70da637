package scripts

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"
)

// An election's candidates and its handovers (package reentrant/election):
// who stands, a leader giving the lock to a successor, and a request that
// the leader resign. See candidatelib.lua for how a candidate stands.

var (
	//go:embed electionstand.lua
	electionStandLua    string
	electionStandScript = newScript(clockLib, candidateLib, electionStandLua)

	//go:embed electioncandidates.lua
	electionCandidatesLua    string
	electionCandidatesScript = newScript(candidateLib, electionCandidatesLua)

	//go:embed electionhandover.lua
	electionHandOverLua    string
	electionHandOverScript = newScript(candidateLib, electionHandOverLua)

	//go:embed electionrequest.lua
	electionRequestLua    string
	electionRequestScript = newScript(candidateLib, electionRequestLua)
)

// candidatePrefix is what a candidate's registration key is its owner
// after: relock_election_candidate:{lock}:.
func candidatePrefix(lock string) string { return prefixed("relock_election_candidate", lock) + ":" }

// CandidateKey returns the key of a Campaign's registration reg (an owner
// of its own) as a candidate of the election whose lock is key lock, a
// plain lock reg holds while the Campaign stands:
// relock_election_candidate:{lock}:<reg>.
func CandidateKey(lock, reg string) string { return candidatePrefix(lock) + reg }

// ElectionStand runs electionstand.lua: owner, whose Campaign holds the
// registration reg, stands with value (leave false), or leaves the roll
// (leave true), giving back the lock a handover left for it untaken. It
// reports false when reg is not held, or, leaving, when owner's entry is
// another Campaign's.
func ElectionStand(ctx context.Context, c Conn, lock, owner, reg, value string, leave bool, pub Publish) (bool, error) {
	flag := "0"
	if leave {
		flag = "1"
	}
	r, syncErr := electionStandScript.exec(ctx, c, []string{candidatesKey(lock), ElectionChannel(lock), lock, LockChannel(lock)},
		[]string{owner, value, candidatePrefix(lock), string(pub), flag, reg})
	n, err := r.AsInt64()
	if err != nil {
		return false, err
	}
	return n == 1, okIf(n == 1, syncErr)
}

// Candidate is one live candidate of an election.
type Candidate struct {
	Owner, Value string
	Since        time.Time     // when it stood, on Redis's clock
	TTL          time.Duration // what its registration has left
}

// ElectionCandidates runs electioncandidates.lua: the live candidates,
// oldest first, and the leader's owner ("" for none).
func ElectionCandidates(ctx context.Context, c Conn, lock string) (leader string, cs []Candidate, err error) {
	r, _ := electionCandidatesScript.exec(ctx, Conn{Client: c.Client}, []string{lock, electionKey(lock), candidatesKey(lock)}, []string{candidatePrefix(lock)})
	vs, err := r.ToArray()
	if err != nil {
		return "", nil, err
	}
	if len(vs) == 0 {
		return "", nil, fmt.Errorf("electioncandidates.lua: empty reply")
	}
	leader, _ = vs[0].ToString()
	for _, v := range vs[1:] {
		f, err := v.ToArray()
		if err != nil || len(f) != 4 {
			return "", nil, fmt.Errorf("electioncandidates.lua: unexpected candidate %v", v)
		}
		var cd Candidate
		cd.Owner, _ = f[0].ToString()
		since, _ := f[1].ToString()
		ms, _ := strconv.ParseInt(since, 10, 64)
		cd.Since = time.UnixMilli(ms)
		cd.Value, _ = f[2].ToString()
		ttl, _ := f[3].AsInt64()
		cd.TTL = time.Duration(ttl) * time.Millisecond
		cs = append(cs, cd)
	}
	return leader, cs, nil
}

// HandedOver is what electionhandover.lua did.
type HandedOver int

// What a handover did.
const (
	HandOverNotHeld  HandedOver = -1 // the owner held nothing: nothing changed
	HandOverReleased HandedOver = 0  // no live successor: released, as Unlock
	HandedOn         HandedOver = 1  // kept for the successor
	HandOverKept     HandedOver = 2  // other holds of the owner remain; one given back
	anyStanding                 = "*"
)

// ElectionHandOver runs electionhandover.lua: owner, leading with term
// and standing under the registration reg, gives the lock to the
// candidate to ("" for the one standing longest), kept for it window,
// and leaves the roll; restore is the lock's TTL while other holds of
// owner remain. It returns what it did and the successor.
func ElectionHandOver(ctx context.Context, c Conn, lock, owner, reg string, term int64, to string, window, restore time.Duration, pub Publish) (HandedOver, string, error) {
	if to == "" {
		to = anyStanding
	}
	r, syncErr := electionHandOverScript.exec(ctx, c,
		[]string{lock, electionKey(lock), ElectionChannel(lock), candidatesKey(lock), LockChannel(lock)},
		[]string{owner, strconv.FormatInt(term, 10), to, ms(window), string(pub), ms(restore), candidatePrefix(lock), reg})
	vs, err := r.ToArray()
	if err != nil {
		return HandOverNotHeld, "", err
	}
	n, _ := vs[0].AsInt64()
	var successor string
	if len(vs) > 1 {
		successor, _ = vs[1].ToString()
	}
	return HandedOver(n), successor, okIf(n >= 0, syncErr)
}

// Requested is what electionrequest.lua found.
type Requested int

// What a request to resign found.
const (
	RequestMade  Requested = 1
	NoLeader     Requested = 0
	NotCandidate Requested = -1
	IsLeader     Requested = -2
)

// ElectionRequest runs electionrequest.lua: asks the leader to resign to
// the candidate to ("" for the one standing longest). It returns what it
// found, and with RequestMade the leader's term and owner.
func ElectionRequest(ctx context.Context, c Conn, lock, to string, pub Publish) (Requested, int64, string, error) {
	if to == "" {
		to = anyStanding
	}
	r, syncErr := electionRequestScript.exec(ctx, c, []string{lock, electionKey(lock), ElectionChannel(lock), candidatesKey(lock)},
		[]string{to, candidatePrefix(lock), string(pub)})
	vs, err := r.ToArray()
	if err != nil {
		return NoLeader, 0, "", err
	}
	n, _ := vs[0].AsInt64()
	if n != 1 || len(vs) < 3 {
		return Requested(n), 0, "", nil
	}
	termText, _ := vs[1].ToString()
	term, _ := strconv.ParseInt(termText, 10, 64)
	leader, _ := vs[2].ToString()
	return RequestMade, term, leader, syncErr
}

// ms formats d as whole milliseconds, at least 1.
func ms(d time.Duration) string { return strconv.FormatInt(max(d.Milliseconds(), 1), 10) }
