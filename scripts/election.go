package scripts

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// An election (package reentrant/election) is a fenced lock whose holder
// leads, and a record of the leader beside it, in the lock's slot. These
// keys and scripts are relock's own: Redisson has no election.

var (
	//go:embed electionproclaim.lua
	electionProclaimLua    string
	electionProclaimScript = newScript(clockLib, electionProclaimLua)

	//go:embed electionread.lua
	electionReadLua    string
	electionReadScript = newScript(electionReadLua)

	// candidateLib is the candidates' functions (see candidates.go); a
	// resigning leader leaves the roll with them.
	//go:embed candidatelib.lua
	candidateLib string

	//go:embed electionresign.lua
	electionResignLua    string
	electionResignScript = newScript(candidateLib, electionResignLua)

	//go:embed fenced.lua
	fencedLua    string
	fencedScript = newScript(fencedLua)
)

// electionKey returns the key of the leader's record of the election whose
// lock is key lock: relock_election:{lock}.
func electionKey(lock string) string { return prefixed("relock_election", lock) }

// candidatesKey returns the roll of the election whose lock is key lock:
// relock_election_candidates:{lock}.
func candidatesKey(lock string) string { return prefixed("relock_election_candidates", lock) }

// ElectionChannel returns the channel on which changes of that record are
// announced: relock_election_channel:{lock}.
func ElectionChannel(lock string) string { return prefixed("relock_election_channel", lock) }

// fenceKey returns the key that keeps the largest token seen for key:
// relock_fence:{key}.
func fenceKey(key string) string { return prefixed(fencePrefix, key) }

const fencePrefix = "relock_fence"

// FenceSeen returns the largest token that has read or written key
// through Fenced, 0 for none.
func FenceSeen(ctx context.Context, c Conn, key string) (int64, error) {
	n, err := c.Do(ctx, c.B().Get().Key(fenceKey(key)).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0, nil
	}
	return n, err
}

// IsFenceKey reports whether key is one of the fences' own keys, which
// Fenced must not be given to fence.
func IsFenceKey(key string) bool { return strings.HasPrefix(key, fencePrefix+":") }

// ElectionProclaim runs electionproclaim.lua: owner, holding lock with
// term, becomes the leader on record with value, announced with pub. It
// reports false when owner does not hold the lock, or a larger term is on
// record (a newer leader): nothing changed then.
func ElectionProclaim(ctx context.Context, c Conn, lock, owner string, term int64, value string, pub Publish) (bool, error) {
	r, syncErr := electionProclaimScript.exec(ctx, c, []string{lock, electionKey(lock), ElectionChannel(lock)},
		[]string{owner, strconv.FormatInt(term, 10), value, string(pub)})
	n, err := r.AsInt64()
	if err != nil {
		return false, err
	}
	return n == 1, okIf(n == 1, syncErr)
}

// ElectionRecord is the leader on record: Owner is "" when there is none
// now, and Term the last term recorded (0 for none).
type ElectionRecord struct {
	Value, Owner string
	Term         int64
	Since        time.Time     // when the term began, on Redis's clock
	TTL          time.Duration // the lock's time to live
	// Request is the successor a request to resign named ("*" for the
	// candidate standing longest), "" when none was made of this term.
	Request string
}

// ElectionRead runs electionread.lua.
func ElectionRead(ctx context.Context, c Conn, lock string) (ElectionRecord, error) {
	r, _ := electionReadScript.exec(ctx, Conn{Client: c.Client}, []string{lock, electionKey(lock)}, nil)
	vs, err := r.ToArray()
	if err != nil {
		return ElectionRecord{}, err
	}
	if len(vs) != 6 {
		return ElectionRecord{}, fmt.Errorf("electionread.lua: unexpected reply of %d values", len(vs))
	}
	var rec ElectionRecord
	rec.Value, _ = vs[0].ToString()
	rec.Owner, _ = vs[1].ToString()
	term, _ := vs[2].ToString()
	rec.Term, _ = strconv.ParseInt(term, 10, 64)
	if since, _ := vs[3].ToString(); since != "" {
		ms, _ := strconv.ParseInt(since, 10, 64)
		rec.Since = time.UnixMilli(ms)
	}
	ttl, _ := vs[4].AsInt64()
	rec.TTL = time.Duration(ttl) * time.Millisecond
	rec.Request, _ = vs[5].ToString()
	return rec, nil
}

// ElectionResign runs electionresign.lua and reports whether owner with
// term was on record; owner's candidacy under the registration reg ("":
// none) leaves the roll.
func ElectionResign(ctx context.Context, c Conn, lock, owner, reg string, term int64, pub Publish) (bool, error) {
	r, syncErr := electionResignScript.exec(ctx, c, []string{electionKey(lock), ElectionChannel(lock), candidatesKey(lock)},
		[]string{owner, strconv.FormatInt(term, 10), string(pub), reg})
	n, err := r.AsInt64()
	if err != nil {
		return false, err
	}
	return n == 1, okIf(n == 1, syncErr)
}

// Fenced runs fenced.lua: a read (set false) or write of key fenced by
// token. ok false means refused: seen is the larger token seen. A read
// of a missing key is found false.
func Fenced(ctx context.Context, c Conn, key string, token int64, set bool, value string) (got string, found, ok bool, seen int64, err error) {
	op := "get"
	if set {
		op = "set"
	}
	r, syncErr := fencedScript.exec(ctx, c, []string{key, fenceKey(key)}, []string{strconv.FormatInt(token, 10), op, value})
	vs, err := r.ToArray()
	if err != nil {
		return "", false, false, 0, err
	}
	if len(vs) != 2 {
		return "", false, false, 0, fmt.Errorf("fenced.lua: unexpected reply of %d values", len(vs))
	}
	if n, _ := vs[0].AsInt64(); n == 0 {
		seen, _ = vs[1].AsInt64()
		return "", false, false, seen, nil
	}
	got, err = vs[1].ToString()
	if rueidis.IsRedisNil(err) {
		return "", false, true, 0, syncErr
	}
	return got, err == nil, true, 0, syncErr
}
