package scripts

import (
	"context"
	_ "embed"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// RPermitExpirableSemaphore (RedissonPermitExpirableSemaphore.java): the
// string key N holding the available permits, the ZSET {N}:timeout of the
// permits taken (id as 16 raw bytes -> the ms their lease ends), and the
// semaphore channel redisson_sc:{N}. Ids are shown as 32 lowercase hex
// digits, as Redisson's ByteBufUtil.hexDump writes them.

// permitLib holds the functions the permit scripts share, after
// countlib.lua's check of N; it is prepended to each body.
var permitLib = countLib + permitLibLua

//go:embed permitlib.lua
var permitLibLua string

var (
	//go:embed permitacquire.lua
	permitAcquireLua    string
	permitAcquireScript = coalescible([]string{clockLib}, permitLib, permitAcquireLua)

	//go:embed permitrelease.lua
	permitReleaseLua    string
	permitReleaseScript = coalescible([]string{clockLib}, permitLib, permitReleaseLua)

	//go:embed permitreleaseall.lua
	permitReleaseAllLua    string
	permitReleaseAllScript = newScript(clockLib, permitLib, permitReleaseAllLua)

	//go:embed permitlease.lua
	permitLeaseLua    string
	permitLeaseScript = newScript(clockLib, permitLib, permitLeaseLua)

	//go:embed permitleasetime.lua
	permitLeaseTimeLua    string
	permitLeaseTimeScript = newScript(clockLib, permitLib, permitLeaseTimeLua)

	//go:embed permitrenew.lua
	permitRenewLua    string
	permitRenewScript = newScript(clockLib, permitRenewLua)

	//go:embed permitset.lua
	permitSetLua    string
	permitSetScript = newScript(clockLib, permitLib, permitSetLua)

	//go:embed permitadd.lua
	permitAddLua    string
	permitAddScript = newScript(clockLib, permitLib, permitAddLua)

	//go:embed permitcount.lua
	permitCountLua    string
	permitCountScript = newScript(clockLib, permitLib, permitCountLua)
)

// permitTimeouts returns the key of semaphore name's taken permits:
// {name}:timeout.
func permitTimeouts(name string) string { return suffixed(name, "timeout") }

func permitKeys(name string) []string {
	return []string{name, permitTimeouts(name), SemaphoreChannel(name)}
}

// rawIDs decodes permit ids from hex; a malformed id is an error.
func rawIDs(ids []string) ([]string, error) {
	raw := make([]string, len(ids))
	for i, id := range ids {
		b, err := hex.DecodeString(id)
		if err != nil || len(b) != 16 {
			return nil, fmt.Errorf("permit id %q is not 32 hex digits", id)
		}
		raw[i] = string(b)
	}
	return raw, nil
}

// PermitAcquire runs permitacquire.lua: it takes len(ids) permits under
// ids (32 hex digits each), leased for lease (0: no lease), or none. When
// it takes them, score is the lease end it wrote for each (see
// Held.Token); when it takes none, nearest is the time until the nearest
// lease ends, or -1 when no taken permit has a lease.
func PermitAcquire(ctx context.Context, c Conn, name string, ids []string, lease time.Duration, pub Publish) (acquired bool, score string, nearest time.Duration, err error) {
	raw, err := rawIDs(ids)
	if err != nil {
		return false, "", 0, err
	}
	args := append([]string{itoa(int64(len(ids))), millis(lease), string(pub)}, raw...)
	r, syncErr := permitAcquireScript.exec(ctx, c, permitKeys(name), args)
	reply, err := r.ToArray()
	if err != nil {
		return false, "", 0, err
	}
	if len(reply) == 0 {
		return false, "", 0, fmt.Errorf("permitacquire.lua: empty reply")
	}
	switch taken, _ := reply[0].AsInt64(); {
	case taken == 1 && len(reply) == 2:
		score, err := reply[1].ToString()
		if err != nil {
			return false, "", 0, err
		}
		return true, score, 0, syncErr
	case len(reply) == 2:
		ms, _ := reply[1].AsInt64()
		return false, "", time.Duration(ms) * time.Millisecond, nil
	}
	return false, "", -1, nil
}

// PermitRelease runs permitrelease.lua: it gives back permit id and
// reports whether it was taken with its lease not ended.
func PermitRelease(ctx context.Context, c Conn, name, id string, pub Publish) (bool, error) {
	raw, err := rawIDs([]string{id})
	if err != nil {
		return false, err
	}
	r, syncErr := permitReleaseScript.exec(ctx, c, permitKeys(name), []string{string(pub), raw[0]})
	n, err := r.AsInt64()
	if err != nil {
		return false, err
	}
	return n == 1, okIf(n == 1, syncErr)
}

// PermitReleaseAll runs permitreleaseall.lua: it gives back every permit
// of ids, or none if any is not taken, and returns how many.
func PermitReleaseAll(ctx context.Context, c Conn, name string, ids []string, pub Publish) (int64, error) {
	raw, err := rawIDs(ids)
	if err != nil {
		return 0, err
	}
	r, syncErr := permitReleaseAllScript.exec(ctx, c, permitKeys(name), append([]string{string(pub)}, raw...))
	n, err := r.AsInt64()
	if err != nil {
		return 0, err
	}
	return n, okIf(n > 0, syncErr)
}

// PermitLease runs permitlease.lua: permit id's lease ends lease from now
// (0: no lease). It reports whether the permit is taken.
func PermitLease(ctx context.Context, c Conn, name, id string, lease time.Duration, pub Publish) (bool, error) {
	raw, err := rawIDs([]string{id})
	if err != nil {
		return false, err
	}
	r, syncErr := permitLeaseScript.exec(ctx, c, permitKeys(name), []string{string(pub), raw[0], millis(lease)})
	n, err := r.AsInt64()
	if err != nil {
		return false, err
	}
	return n == 1, okIf(n == 1, syncErr)
}

// PermitLeaseTime runs permitleasetime.lua: how long permit id's lease has
// left, -1 when it has no lease; taken reports whether it is taken.
func PermitLeaseTime(ctx context.Context, c Conn, name, id string, pub Publish) (left time.Duration, taken bool, err error) {
	raw, err := rawIDs([]string{id})
	if err != nil {
		return 0, false, err
	}
	r, _ := permitLeaseTimeScript.exec(ctx, c, permitKeys(name), []string{string(pub), raw[0]})
	ms, err := r.AsInt64()
	switch {
	case rueidis.IsRedisNil(err):
		return 0, false, nil
	case err != nil:
		return 0, false, err
	case ms < 0:
		return -1, true, nil
	}
	return time.Duration(ms) * time.Millisecond, true, nil
}

// PermitRenew runs permitrenew.lua once per batch, all in one pipeline:
// each permit (Key the semaphore's name, Owner the permit id in hex, Token
// the score relock last wrote for it) whose lease has not ended and whose
// score is still Token gets a lease of ttl from now, and its new score in
// Token. A permit whose score someone else changed is left as it is: it
// counts as held, with Left set to what is left of that lease. Every
// semaphore of one batch must be in the same cluster slot. For each batch
// it returns whether each permit is still taken, or the batch's error.
func PermitRenew(ctx context.Context, c Conn, ttl time.Duration, batches [][]Held) (renewed [][]bool, errs []error) {
	calls := make([]call, len(batches))
	for i, b := range batches {
		keys := make([]string, len(b))
		args := make([]string, 1, 1+2*len(b))
		args[0] = millis(ttl)
		for j, h := range b {
			raw, err := rawIDs([]string{h.Owner})
			if err != nil {
				raw = []string{h.Owner} // never taken: renews nothing
			}
			keys[j] = permitTimeouts(h.Key)
			args = append(args, raw[0], h.Token)
		}
		calls[i] = call{keys: keys, args: args}
	}
	renewed = make([][]bool, len(batches))
	errs = make([]error, len(batches))
	for i, r := range permitRenewScript.execMulti(ctx, c, calls) {
		replies, err := r.AsStrSlice()
		if err == nil && len(replies) != len(batches[i]) {
			err = fmt.Errorf("permitrenew.lua: %d replies for %d permits", len(replies), len(batches[i]))
		}
		if err != nil {
			errs[i] = err
			continue
		}
		renewed[i] = make([]bool, len(replies))
		for j, reply := range replies {
			h := &batches[i][j]
			switch left, leased := strings.CutPrefix(reply, "leased:"); {
			case reply == "0":
			case leased && left == "none":
				renewed[i][j], h.Left = true, noLease
			case leased:
				ms, _ := strconv.ParseInt(left, 10, 64)
				renewed[i][j], h.Left = true, time.Duration(ms)*time.Millisecond
			default:
				renewed[i][j], h.Token = true, reply
			}
		}
	}
	return renewed, errs
}

// PermitSet runs permitset.lua: the semaphore's size, available plus taken,
// becomes n.
func PermitSet(ctx context.Context, c Conn, name string, n int64, pub Publish) error {
	r, syncErr := permitSetScript.exec(ctx, c, permitKeys(name), []string{itoa(n), string(pub)})
	if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
		return err
	}
	return syncErr
}

// PermitAdd runs permitadd.lua: n permits more are available (n < 0:
// fewer).
func PermitAdd(ctx context.Context, c Conn, name string, n int64, pub Publish) error {
	r, syncErr := permitAddScript.exec(ctx, c, permitKeys(name), []string{itoa(n), string(pub)})
	if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
		return err
	}
	return syncErr
}

// PermitCount runs permitcount.lua: it reclaims the permits whose lease
// ended and returns how many are available and how many taken.
func PermitCount(ctx context.Context, c Conn, name string, pub Publish) (available, taken int64, err error) {
	r, _ := permitCountScript.exec(ctx, c, permitKeys(name), []string{string(pub)})
	n, err := r.AsIntSlice()
	if err != nil {
		return 0, 0, err
	}
	if len(n) != 2 {
		return 0, 0, fmt.Errorf("permitcount.lua: unexpected reply %v", n)
	}
	return n[0], n[1], nil
}
