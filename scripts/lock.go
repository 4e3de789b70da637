package scripts

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/pubsub"
)

// Publish is the command a script uses to announce a release: classic
// PUBLISH, or sharded SPUBLISH as Redisson uses on a Redis 7+ cluster.
type Publish string

// The publish commands.
const (
	PublishClassic Publish = "publish"
	PublishSharded Publish = "spublish"
	// PublishNone announces nothing, as Redisson's spin lock releases,
	// and as every script does for a user with no channel rights.
	PublishNone Publish = ""
)

var (
	//go:embed acquire.lua
	acquireLua    string
	acquireScript = newScript(wakeLib + acquireLua)

	//go:embed release.lua
	releaseLua    string
	releaseScript = newScript(wakeLib + releaseLua)

	//go:embed fencedacquire.lua
	fencedAcquireLua    string
	fencedAcquireScript = newScript(wakeLib + fencedAcquireLua)

	//go:embed renew.lua
	renewLua    string
	renewScript = newScript(renewLua)

	//go:embed forceunlock.lua
	forceUnlockLua    string
	forceUnlockScript = newScript(wakeLib + forceUnlockLua)
)

// flag is a script's boolean argument: "1" or "0".
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func millis(d time.Duration) string {
	return strconv.FormatInt(d.Milliseconds(), 10)
}

// Acquire runs acquire.lua: owner takes lock key, or takes it once more,
// with the given lease as the key's TTL. When the lock is held by someone
// else it returns acquired false and the key's remaining TTL (-1ms when the
// key has no expiry), and, with directed wakes (w not nil), a holder's
// field. A fresh owner, made for this call, cannot hold the lock already,
// and saves a check. On a synced [Conn], an acquire that replicas did not
// confirm returns acquired true with [ErrNotSynced] or [ErrSyncRefused].
func Acquire(ctx context.Context, c Conn, key, owner string, lease time.Duration, fresh bool, w Wake) (acquired bool, ttl time.Duration, holder string, err error) {
	keys, args := w.with([]string{key, ""}, []string{millis(lease), owner, flag(fresh), "", "", ""}, key)
	res, syncErr := acquireScript.exec(ctx, c, keys, args)
	if w.Client == "" {
		acquired, ttl, err = acquireReply(res, syncErr)
		return acquired, ttl, "", err
	}
	if rueidis.IsRedisNil(res.Error()) {
		return true, 0, "", syncErr
	}
	r, err := res.ToArray()
	if err != nil {
		return false, 0, "", err
	}
	if len(r) != 2 {
		return false, 0, "", fmt.Errorf("acquire.lua: unexpected reply %v", r)
	}
	ms, err := r[0].AsInt64()
	if err != nil {
		return false, 0, "", err
	}
	holder, _ = r[1].ToString()
	return false, time.Duration(ms) * time.Millisecond, holder, nil
}

// tokenCounter returns the key of lock name's fencing-token counter:
// redisson_lock_token:{name}.
func tokenCounter(name string) string {
	return prefixed("redisson_lock_token", name)
}

// FencedAcquire runs fencedacquire.lua: Acquire, plus a fencing token drawn
// from the lock's counter on every success.
func FencedAcquire(ctx context.Context, c Conn, key, owner string, lease time.Duration, fresh bool, w Wake) (acquired bool, ttl time.Duration, token int64, holder string, err error) {
	keys, args := w.with([]string{key, tokenCounter(key), ""}, []string{millis(lease), owner, flag(fresh), "", "", ""}, key)
	res, syncErr := fencedAcquireScript.exec(ctx, c, keys, args)
	r, err := res.ToArray()
	if err != nil {
		return false, 0, 0, "", err
	}
	if len(r) < 2 {
		return false, 0, 0, "", fmt.Errorf("fencedacquire.lua: unexpected reply %v", r)
	}
	flag, err := r[0].AsInt64()
	if err != nil {
		return false, 0, 0, "", err
	}
	n, err := r[1].AsInt64()
	if err != nil {
		return false, 0, 0, "", err
	}
	if flag == 1 {
		return true, 0, n, "", syncErr
	}
	if len(r) > 2 {
		holder, _ = r[2].ToString()
	}
	return false, time.Duration(n) * time.Millisecond, 0, holder, nil
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
	// message was published.
	Freed
)

// Release describes one release request.
type Release struct {
	Key   string
	Owner string
	// RequestID names this request. A retry with the same RequestID within
	// LatchTTL returns the first reply instead of releasing again.
	RequestID string
	// Again says the request may have been sent before (a retry): only
	// then can its latch hold a reply, and only then is it read. (The
	// read-write lock's scripts always read it.)
	Again bool
	// Lease is the TTL restored on the key while holds remain.
	Lease    time.Duration
	LatchTTL time.Duration
	Publish  Publish
	// Directed: a freed lock also tells one registered relock client (see
	// Wake).
	Directed bool
}

// Latch returns the name of the request's unlock latch,
// redisson_unlock_latch:{Key}:RequestID.
func (r Release) Latch() string { return unlockLatch(r.Key, r.RequestID) }

// Run runs release.lua.
func (r Release) Run(ctx context.Context, c Conn) (Released, error) {
	keys := []string{r.Key, LockChannel(r.Key), unlockLatch(r.Key, r.RequestID)}
	args := []string{pubsub.WakeOne, millis(r.Lease), r.Owner, string(r.Publish), millis(r.LatchTTL), flag(r.Again)}
	if r.Directed {
		keys = append(keys, waiters(r.Key))
	}
	return releaseReply(releaseScript.exec(ctx, c, keys, args))
}

// Held names one owner's hold on one lock, for renewal.
type Held struct {
	Key   string
	Owner string
}

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
	renewed = make([][]bool, len(batches))
	errs = make([]error, len(batches))
	for i, r := range s.execMulti(ctx, c, calls) {
		flags, err := r.AsIntSlice()
		if err == nil && len(flags) != len(batches[i]) {
			err = fmt.Errorf("renew.lua: %d replies for %d locks", len(flags), len(batches[i]))
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
		keys = append(keys, waiters(key))
	}
	r, _ := forceUnlockScript.exec(ctx, c, keys, args)
	n, err := r.AsInt64()
	if err != nil {
		return false, err
	}
	return n == 1, nil
}
