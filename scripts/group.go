package scripts

import (
	"context"
	_ "embed"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/minio/highwayhash"
	"github.com/redis/rueidis"

	"github.com/relock-go/relock/pubsub"
)

// The group lock: Redisson's RedissonFasterMultiLock (getMultiLock(group,
// values), Redisson 3.38), one hash per group with fields per value; see
// grouplib.lua for the layout.

var (
	//go:embed grouplib.lua
	groupLib string

	//go:embed groupacquire.lua
	groupAcquireLua    string
	groupAcquireScript = newScript(clockLib, groupLib, groupAcquireLua)

	//go:embed grouprelease.lua
	groupReleaseLua    string
	groupReleaseScript = newScript(clockLib, groupLib, latchLib, groupReleaseLua)

	//go:embed grouprenew.lua
	groupRenewLua    string
	groupRenewScript = newScript(clockLib, groupLib, groupRenewLua)

	//go:embed groupforceunlock.lua
	groupForceUnlockLua    string
	groupForceUnlockScript = newScript(clockLib, groupLib, groupForceUnlockLua)

	//go:embed groupinspect.lua
	groupInspectLua    string
	groupInspectScript = newScript(clockLib, groupLib, groupInspectLua)
)

// groupHashKey is Redisson's key for the group lock's value hash
// (org.redisson.misc.Hash.KEY), as HighwayHash's 32-byte key: its four
// longs, each little-endian, as HighwayHash reads a key.
var groupHashKey = func() []byte {
	k := make([]byte, 32)
	for i, w := range []uint64{0x9e3779b97f4a7c15, 0xf39cc0605cedc834, 0x1082276bf3a27251, 0xf86c6a11d0c18e95} {
		binary.LittleEndian.PutUint64(k[8*i:], w)
	}
	return k
}()

// GroupField returns the hash field of a group lock's value whose encoded
// form is value, as Redisson names it (Hash.hash128toBase64): the
// HighwayHash-128 of the bytes under Redisson's key, its two 64-bit halves
// big-endian (netty's copyLong), in standard base64 without its final "==".
// Redisson encodes a value with the lock's codec first: for a Java String
// with StringCodec, value is its UTF-8 bytes.
func GroupField(value string) string {
	sum := highwayhash.Sum128([]byte(value), groupHashKey)
	var out [16]byte
	binary.BigEndian.PutUint64(out[:8], binary.LittleEndian.Uint64(sum[:8]))
	binary.BigEndian.PutUint64(out[8:], binary.LittleEndian.Uint64(sum[8:]))
	return base64.StdEncoding.EncodeToString(out[:])[:22]
}

// GroupFields returns the fields of values, each once, sorted (Redisson
// collects them into a set).
func GroupFields(values []string) []string {
	fields := make([]string, len(values))
	for i, v := range values {
		fields[i] = GroupField(v)
	}
	slices.Sort(fields)
	return slices.Compact(fields)
}

// GroupValueChannel returns the channel on which relock's releases of
// group lock name announce that the value whose field is field became
// free: relock_group:{name}:field. Redisson never reads it.
func GroupValueChannel(name, field string) string {
	return prefixed("relock_group", name) + ":" + field
}

// GroupAcquire runs groupacquire.lua: a.Owner takes one more hold of every
// value of group a.Key whose fields are a.Fields, or none. Its reply is
// LockAcquire's, PTTL how long until the last of the others' holds among
// them ends, and Blocker that value's field.
func GroupAcquire(ctx context.Context, c Conn, a Acquire) (Acquired, error) {
	args := make([]string, 0, 2+len(a.Fields))
	args = append(args, millis(a.Lease), a.Owner)
	args = append(args, a.Fields...)
	r, syncErr := groupAcquireScript.exec(ctx, c, []string{a.Key}, args)
	if err := r.Error(); rueidis.IsRedisNil(err) {
		return Acquired{OK: true}, syncErr
	}
	v, err := r.ToArray()
	if err != nil {
		return Acquired{}, err
	}
	if len(v) != 2 {
		return Acquired{}, fmt.Errorf("groupacquire.lua: unexpected reply %v", v)
	}
	ms, err := v[0].AsInt64()
	if err != nil {
		return Acquired{}, err
	}
	blocker, err := v[1].ToString()
	return Acquired{PTTL: time.Duration(ms) * time.Millisecond, Blocker: blocker}, err
}

// GroupRelease runs grouprelease.lua for r.Owner's newest hold of the
// values r.Fields of group r.Key: Freed when no hold of them is left,
// StillHeld when some are, NotHeld (and nothing changed) when r.Owner
// does not hold them all.
func GroupRelease(ctx context.Context, c Conn, r Release) (Released, error) {
	keys := []string{r.Key, LockChannel(r.Key), unlockLatch(r.Key, r.RequestID)}
	args := make([]string, 0, 7+len(r.Fields))
	args = append(args, pubsub.WakeTold, millis(r.Lease), r.Owner, string(r.Publish),
		millis(r.LatchTTL), flag(r.Again), flag(r.Believed))
	args = append(args, r.Fields...)
	return releaseReply(groupReleaseScript.exec(ctx, c, keys, args))
}

// GroupRenew is Renew for group locks: each Held's Owner keeps its holds
// of the values Fields of group Key, each ending ttl from now, if it still
// holds every one of them.
func GroupRenew(ctx context.Context, c Conn, ttl time.Duration, batches [][]Held) (renewed [][]bool, errs []error) {
	calls := make([]call, len(batches))
	for i, b := range batches {
		keys := make([]string, len(b))
		args := []string{millis(ttl)}
		for j, h := range b {
			keys[j] = h.Key
			args = append(args, h.Owner, strconv.Itoa(len(h.Fields)))
			args = append(args, h.Fields...)
		}
		calls[i] = call{keys: keys, args: args}
	}
	return renewFlags("grouprenew.lua", groupRenewScript.execMulti(ctx, c, calls), batches)
}

// GroupForceUnlock runs groupforceunlock.lua: the values fields of group
// key are freed whoever holds them, and "0" is published on the group's
// channel. It reports whether any of them had a holder.
func GroupForceUnlock(ctx context.Context, c Conn, key string, fields []string, pub Publish) (bool, error) {
	args := append([]string{pubsub.WakeOne, string(pub)}, fields...)
	r, _ := groupForceUnlockScript.exec(ctx, c, []string{key, LockChannel(key)}, args)
	n, err := r.AsInt64()
	return n > 0, err
}

// GroupValue is one value of a group lock as GroupInspect reads it.
type GroupValue struct {
	Holder string        // "" when nobody holds it
	Left   time.Duration // until its holder's hold ends
	Count  int64         // its holder's hold count
}

// GroupInspect runs groupinspect.lua: who holds each of the values fields
// of group key, for how long, how many times.
func GroupInspect(ctx context.Context, c Conn, key string, fields []string) ([]GroupValue, error) {
	r, _ := groupInspectScript.exec(ctx, c, []string{key}, fields)
	rows, err := r.ToArray()
	if err != nil {
		return nil, err
	}
	if len(rows) != len(fields) {
		return nil, fmt.Errorf("groupinspect.lua: %d replies for %d values", len(rows), len(fields))
	}
	out := make([]GroupValue, len(rows))
	for i, row := range rows {
		v, err := row.ToArray()
		if err != nil || len(v) == 0 {
			continue
		}
		if len(v) != 3 {
			return nil, fmt.Errorf("groupinspect.lua: unexpected reply %v", v)
		}
		out[i].Holder, _ = v[0].ToString()
		ms, _ := v[1].AsInt64()
		out[i].Left = time.Duration(ms) * time.Millisecond
		out[i].Count, _ = v[2].AsInt64()
	}
	return out, nil
}
