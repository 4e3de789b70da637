package scripts

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/pubsub"
)

// unguarded is the prologue of an acquire attempt with no guard (see
// guard.lua): it is never abandoned.
const unguarded = "local function abandoned() return false end\n"

var (
	//go:embed acquire.lua
	acquireLua    string
	acquireScript = coalescible([]string{clockLib, wakeLib, lockLib}, unguarded, acquireLua)

	//go:embed nonreentrantacquire.lua
	nonReentrantAcquireLua    string
	nonReentrantAcquireScript = coalescible([]string{clockLib, wakeLib, lockLib}, unguarded, nonReentrantAcquireLua)

	// The same two, each behind guard.lua (see Acquire.Guard), or, as
	// above, behind unguarded.
	//go:embed guard.lua
	guardLua                         string
	guardedAcquireScript             = coalescible([]string{clockLib, wakeLib, lockLib}, guardLua, acquireLua)
	guardedNonReentrantAcquireScript = coalescible([]string{clockLib, wakeLib, lockLib}, guardLua, nonReentrantAcquireLua)

	//go:embed release.lua
	releaseLua    string
	releaseScript = coalescible([]string{clockLib, wakeLib, latchLib, holdLib}, releaseLua)

	//go:embed fencedacquire.lua
	fencedAcquireLua    string
	fencedAcquireScript = coalescible([]string{clockLib, tokenLib, wakeLib}, fencedAcquireLua)

	//go:embed renew.lua
	renewLua    string
	renewScript = newScript(renewLua)

	//go:embed forceunlock.lua
	forceUnlockLua    string
	forceUnlockScript = newScript(clockLib, wakeLib, forceUnlockLua)
)

// keysArgs returns room for a script's keys (room for maxKeys of them,
// nKeys set) and nArgs args, in one allocation.
func keysArgs(nKeys, maxKeys, nArgs int) (keys, args []string) {
	all := make([]string, maxKeys+nArgs)
	return all[:nKeys:maxKeys], all[maxKeys:]
}

// Acquire is one run of a lock's acquire script: Owner takes lock Key, or
// takes it once more, with Lease as the key's TTL.
type Acquire struct {
	Key, Owner string
	Lease      time.Duration
	// Wake asks for directed wakes (plain and fenced locks; see Wake).
	Wake Wake
	// Turn is the turn Owner is given in a fair lock's queue (Redisson's
	// threadWaitTime), or the window in which a priority lock's waiter
	// must try again; with Join, an owner that cannot take the lock joins
	// the queue (or stays in it); Publish tells a new head its turn has
	// come (fair and priority locks only).
	Turn    time.Duration
	Join    bool
	Publish Publish
	// GrantTry, when not 0, says Owner, made for this call, takes the
	// fair or priority lock straight from a release while it waits (see
	// FairAcquire), and numbers this attempt among the call's, from 1.
	GrantTry int
	// Priority is Owner's priority for a priority lock, 0 to 255; Aging
	// how much earlier one level places it in the queue (see
	// PriorityAcquire).
	Priority int
	Aging    time.Duration
	// Fields are a group lock's value fields (GroupAcquire; see
	// GroupFields).
	Fields []string
	// CounterTTL is how long a fenced lock's token counter lives after
	// this draw (FencedAcquire); < 0: for good, as Redisson keeps it.
	CounterTTL time.Duration
	// Guard (LockAcquire and NonReentrantAcquire) makes the attempt do
	// nothing if it runs after Abandon for Key and Owner: an attempt its
	// caller gave up on in flight can then be undone at once, on any
	// connection, without waiting for its reply.
	Guard bool
}

// Acquired is what an acquire script did.
type Acquired struct {
	// OK: the lock is Owner's now (one more hold).
	OK bool
	// PTTL, when the lock is held by someone else: the key's remaining TTL
	// (-1ms when it has no expiry); for a fair lock, how long the turns
	// ahead may last, and 0 when it is another waiter's turn.
	PTTL time.Duration
	// Token is the fencing token a fenced lock drew (from 1).
	Token int64
	// Blocker, for a group lock, is the field of the value whose holder's
	// hold ends last among those that kept Owner out (GroupAcquire).
	Blocker string
	// Handed: the lock is held by the owner of the client's offer
	// (Wake.OfferFirst), given by a release whose message has not come; the
	// caller holds it as that owner, with the TTL the release set.
	Handed bool
}

// LockAcquire runs acquire.lua (RLock) for a. On a synced [Conn], an
// acquire that replicas did not confirm returns OK with [ErrNotSynced] or
// [ErrSyncRefused].
func LockAcquire(ctx context.Context, c Conn, a Acquire) (Acquired, error) {
	if a.Guard {
		return a.runOn(ctx, c, guardedAcquireScript)
	}
	return a.runOn(ctx, c, acquireScript)
}

// NonReentrantAcquire runs nonreentrantacquire.lua (RNonReentrantLock) for
// a: LockAcquire, but an owner that holds the lock already is refused with
// the error reply CodeReentry, and nothing changes.
func NonReentrantAcquire(ctx context.Context, c Conn, a Acquire) (Acquired, error) {
	if a.Guard {
		return a.runOn(ctx, c, guardedNonReentrantAcquireScript)
	}
	return a.runOn(ctx, c, nonReentrantAcquireScript)
}

// guardKey returns the key Abandon sets for owner's attempt on lock name:
// relock_abandoned:{name}:<owner>, in name's hash slot.
func guardKey(name, owner string) string {
	if strings.Contains(name, "{") { // prefixed, in one allocation
		return "relock_abandoned:" + name + ":" + owner
	}
	return "relock_abandoned:{" + name + "}:" + owner
}

// Abandon marks owner's attempts on lock name as given up on, for ttl: a
// guarded attempt (Acquire.Guard) that runs after it does nothing. The
// caller then gives back what an attempt that ran before it took.
func Abandon(ctx context.Context, c Conn, name, owner string, ttl time.Duration) error {
	return c.Do(ctx, c.B().Set().Key(guardKey(name, owner)).Value("1").PxMilliseconds(max(ttl.Milliseconds(), 1)).Build()).Error()
}

// runOn runs s, an acquire script with acquire.lua's keys and args, for a.
func (a Acquire) runOn(ctx context.Context, c Conn, s *script) (Acquired, error) {
	g := 0 // guard.lua's key comes first
	if a.Guard {
		g = 1
	}
	keys, args := keysArgs(2+g, 3+g, 7)
	if a.Guard {
		keys[0] = guardKey(a.Key, a.Owner)
	}
	keys[g] = a.Key
	args[0], args[1] = millis(a.Lease), a.Owner
	keys, args = a.Wake.with(keys, args[:5], a.Key)
	if w := a.Wake; w.Client != "" && w.Offers && (w.OfferFirst != 0 || w.Settle == SettleDrop) {
		keys = append(keys, grants(a.Key))
		args = append(args, "0")
		if w.OfferFirst != 0 {
			args[len(args)-1] = offerArg(w.OfferFirst, w.OfferLast)
		}
		if w.Settle == SettleDrop {
			args = append(args, millis(w.Listens))
		}
	}
	return acquireReply(s.exec(ctx, c, keys, args))
}

// tokenCounter returns the key of lock name's fencing-token counter:
// redisson_lock_token:{name}.
func tokenCounter(name string) string {
	return prefixed("redisson_lock_token", name)
}

// FencedAcquire runs fencedacquire.lua (RFencedLock) for a: LockAcquire,
// plus a fencing token drawn from the lock's counter on every success.
func FencedAcquire(ctx context.Context, c Conn, a Acquire) (Acquired, error) {
	keys, args := keysArgs(3, 3, 7)
	keys[0], keys[1] = a.Key, tokenCounter(a.Key)
	args[0], args[1], args[2] = millis(a.Lease), a.Owner, "-1"
	args[3] = strconv.FormatInt(time.Now().UnixMicro(), 10) // see tokenlib.lua's draw
	if a.CounterTTL >= 0 {
		args[2] = millis(a.CounterTTL)
	}
	keys, args = a.Wake.with(keys, args, a.Key)
	res, syncErr := fencedAcquireScript.exec(ctx, c, keys, args)
	r, err := res.ToArray()
	if err != nil {
		return Acquired{}, err
	}
	if len(r) < 2 {
		return Acquired{}, fmt.Errorf("fencedacquire.lua: unexpected reply %v", r)
	}
	flag, err := r[0].AsInt64()
	if err != nil {
		return Acquired{}, err
	}
	n, err := r[1].AsInt64()
	if err != nil {
		return Acquired{}, err
	}
	if flag == 1 {
		return Acquired{OK: true, Token: n}, syncErr
	}
	return Acquired{PTTL: time.Duration(n) * time.Millisecond}, nil
}

// Released is what a release did.
type Released int

// The replies of release.lua.
const (
	// NotHeld: the owner held nothing; nothing changed.
	NotHeld Released = iota
	// StillHeld: one hold was given back and others remain.
	StillHeld
	// Freed: the last hold was given back; the key is gone and the unlock
	// message was published, or the lock was handed on to the next relock
	// client (see Offer).
	Freed
)

// Release describes one release request.
type Release struct {
	Key   string
	Owner string
	// RequestID names this request. A retry with the same RequestID within
	// LatchTTL returns the first reply instead of releasing again.
	RequestID string
	// Again says an earlier send of the request may have run (its reply
	// was lost): only then can its latch hold a reply, and only then is it
	// read. (The read-write lock's scripts always read it.)
	Again bool
	// Lease is the TTL restored on the key while holds remain.
	Lease    time.Duration
	LatchTTL time.Duration
	Publish  Publish
	// Directed: a freed lock also tells one registered relock client (see
	// Wake), and marks its message on Redisson's channel as told
	// (pubsub.WakeTold), which relock waiters let pass.
	Directed bool
	// Handoff (a plain lock, with Directed): a freed lock is given to the
	// client told, when it can be (see Offer); Offer.Client is the
	// releasing client, and, when it Listens on Redisson's channel (it
	// waited on the lock lately), Offer, when its N is not 0, its own
	// offer, written if the lock is freed.
	Handoff bool
	Offer   Offer
	// Count (with Handoff): the client may count a channel's listeners
	// (PUBSUB NUMSUB, or SHARDNUMSUB with Publish sharded). A release by a
	// client that Listens, which most likely hands the lock on, then counts
	// Redisson's channel's listeners before publishing there, and publishes
	// nothing there when it hands the lock on: no listener could take it.
	// Without Count it publishes first, as every other release does, and
	// reads PUBLISH's count.
	Count bool
	// Believed: the caller has the hold it gives back and believes it (it
	// was not found lost, and its local deadline has not passed). Then a
	// release that frees the lock writes no latch: the commonest release
	// costs two commands fewer. The price is paid only when that release's
	// reply is lost: its retry finds no hold and answers NotHeld, since it
	// cannot tell its first send freeing the lock from the hold lost
	// meanwhile. The two are not independent: a restart or failover that
	// loses data also loses replies, and a pooled connection the server
	// closed fails its next send as if it had run. Run (release.lua),
	// FairRelease and PriorityRelease read it; the read-write lock's
	// releases always write their latch.
	Believed bool
	// Fields are a group lock's value fields (GroupRelease).
	Fields []string
}

// Latched reports whether the request's latch may exist once it answered
// res: not after a believed release freed the lock.
func (r Release) Latched(res Released) bool { return !(r.Believed && res == Freed) }

// Latch returns the name of the request's unlock latch,
// redisson_unlock_latch:{Key}:RequestID.
func (r Release) Latch() string { return unlockLatch(r.Key, r.RequestID) }

// LockRelease runs release.lua for r: RLock's release, which the fenced,
// spin and non-reentrant locks share (Release.Run, as a kind's release
// function).
func LockRelease(ctx context.Context, c Conn, r Release) (Released, error) { return r.Run(ctx, c) }

// Run runs release.lua.
func (r Release) Run(ctx context.Context, c Conn) (Released, error) {
	keys, args := keysArgs(3, 5, 14)
	keys[0], keys[1], keys[2] = r.Key, LockChannel(r.Key), unlockLatch(r.Key, r.RequestID)
	args[0], args[1], args[2], args[3] = pubsub.WakeOne, millis(r.Lease), r.Owner, string(r.Publish)
	args[4], args[5], args[6] = millis(r.LatchTTL), flag(r.Again), flag(r.Believed)
	args = args[:7]
	switch {
	case r.Directed && r.Handoff:
		w, g := waitersAndGrants(r.Key)
		keys = append(keys, w, g)
		args[0] = pubsub.WakeTold
		args = append(args, r.Offer.Client)
		if r.Offer.Listens > 0 { // else it offers nothing, and is not registered
			args = append(args, "", millis(r.Offer.Lease), millis(r.Offer.Listens), millis(r.Offer.Keep), flag(r.Offer.Drop), flag(r.Count))
			if r.Offer.N != 0 {
				args[8] = offerArg(r.Offer.N, r.Offer.Last)
			}
		}
	case r.Directed:
		keys = append(keys, waiters(r.Key))
		args[0] = pubsub.WakeTold
	}
	return releaseReply(releaseScript.exec(ctx, c, keys, args))
}

// Held names one owner's hold on one lock, for renewal.
type Held struct {
	Key   string
	Owner string
	// For a permit (PermitRenew): Token is the score relock last wrote for
	// it, which a renewal replaces with the new one; Left, set by a
	// renewal that found a lease someone else set, is what is left of it
	// (the permit was not renewed; [noLease]: none).
	Token string
	Left  time.Duration
	// Fields are a group lock's value fields (GroupRenew).
	Fields []string
}

// noLease is the Left of a permit whose lease another client removed.
const noLease time.Duration = 1<<63 - 1

// Renew runs renew.lua once per batch, all batches in one pipeline, setting
// each held key's TTL to ttl if its owner still holds it. Every key of one
// batch must be in the same cluster slot (see [Slot]). For each batch it
// returns whether each lock was renewed, or the batch's error.
func Renew(ctx context.Context, c Conn, ttl time.Duration, batches [][]Held) (renewed [][]bool, errs []error) {
	return renewWith(renewScript, ctx, c, ttl, batches)
}

func renewWith(s *script, ctx context.Context, c Conn, ttl time.Duration, batches [][]Held) (renewed [][]bool, errs []error) {
	calls := make([]call, len(batches))
	ms := millis(ttl)
	for i, b := range batches {
		keys := make([]string, len(b))
		args := make([]string, len(b)+1)
		args[0] = ms
		for j, h := range b {
			keys[j], args[j+1] = h.Key, h.Owner
		}
		calls[i] = call{keys: keys, args: args}
	}
	return renewFlags("renew.lua", s.execMulti(ctx, c, calls), batches)
}

// renewFlags reads the replies of a renewal script's calls, one per batch:
// an array with 1 for each hold of the batch renewed, 0 for each not.
func renewFlags(script string, replies []rueidis.RedisResult, batches [][]Held) (renewed [][]bool, errs []error) {
	renewed = make([][]bool, len(batches))
	errs = make([]error, len(batches))
	for i, r := range replies {
		flags, err := r.AsIntSlice()
		if err == nil && len(flags) != len(batches[i]) {
			err = fmt.Errorf("%s: %d replies for %d locks", script, len(flags), len(batches[i]))
		}
		if err != nil {
			errs[i] = err
			continue
		}
		renewed[i] = make([]bool, len(flags))
		for j, f := range flags {
			renewed[i][j] = f == 1
		}
	}
	return renewed, errs
}

// ForceUnlock runs forceunlock.lua: it deletes lock key whoever holds it and
// publishes message on channel, and, directed, tells one registered relock
// client (see Wake). It reports whether there was a lock.
func ForceUnlock(ctx context.Context, c Conn, key, channel, message string, pub Publish, directed bool) (bool, error) {
	keys, args := []string{key, channel}, []string{message, string(pub)}
	if directed {
		keys = append(keys, waiters(key), grants(key))
	}
	r, _ := forceUnlockScript.exec(ctx, c, keys, args)
	n, err := r.AsInt64()
	if err != nil {
		return false, err
	}
	return n == 1, nil
}

// acquireReply reads an acquire script's reply. An acquire whose writes
// replicas did not confirm reports OK and the sync error: the caller
// decides whether to keep or roll back the hold.
func acquireReply(r rueidis.RedisResult, syncErr error) (Acquired, error) {
	ms, err := r.AsInt64()
	if rueidis.IsRedisNil(err) {
		return Acquired{OK: true}, syncErr
	}
	if err != nil {
		return Acquired{}, err
	}
	switch ms {
	case handed:
		return Acquired{OK: true, Handed: true}, syncErr
	case guarded:
		return Acquired{}, nil // after Abandon: nobody awaits this reply
	}
	return Acquired{PTTL: time.Duration(ms) * time.Millisecond}, nil
}

// handed is acquire.lua's reply when a release gave the lock to the
// caller's client (Acquired.Handed).
const handed = -3

// guarded is guard.lua's reply: the attempt ran after Abandon, and did
// nothing.
const guarded = -4

// releaseReply reads a release script's reply. A release that replicas did
// not confirm still happened on the master: the worst a failover can do is
// bring the hold back until its TTL ends, so the sync error is dropped.
func releaseReply(r rueidis.RedisResult, _ error) (Released, error) {
	n, err := r.AsInt64()
	switch {
	case rueidis.IsRedisNil(err):
		return NotHeld, nil
	case err != nil:
		return NotHeld, err
	case n == 1:
		return Freed, nil
	case n == 0:
		return StillHeld, nil
	}
	return NotHeld, fmt.Errorf("release: unexpected reply %d", n)
}
