package reentrant

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/pubsub"
	"github.com/relock-go/relock/scripts"
)

// KeyInfo is what Inspect found at a name: which of Redisson's layouts it
// holds, and what is in it. It is a snapshot read with plain commands, not
// atomically; a lock can change hands between them.
type KeyInfo struct {
	Name string
	// Kind is KindLock, KindFair, KindPriority, KindFenced, KindReadWrite,
	// KindGroup, KindSemaphore, KindPermitSemaphore, KindLatch, KindRate, or:
	// KindSemaphoreOrLatch for a count no one is waiting on (Redisson
	// stores both as a number), "" when nothing is there, and KindOther
	// for a key of any other shape.
	Kind Kind
	// RedisType is TYPE's answer for Name ("none" when it is not there).
	RedisType string
	// TTL is the key's time to live: NoExpiry when it has none, 0 when
	// there is no key.
	TTL time.Duration
	// Holders are a lock's owners with their hold counts (Write marks a
	// read-write lock's writer), a group lock's held values (Value) with
	// each one's owner, count and hold end (Deadline), sorted by Value, or
	// a permit-expirable semaphore's taken permits (Owner is the id,
	// Deadline its lease end, zero without).
	Holders []Holder
	// Mode is a read-write lock's mode: "read" or "write".
	Mode string
	// Queue is a fair lock's waiters in order, with their deadlines; or a
	// priority lock's in the order they will be served, each with its
	// priority, its arrival (Since) and when it is taken for dead if it
	// makes no other attempt (Deadline).
	Queue []Holder
	// Token is the last fencing token a fenced lock drew.
	Token int64
	// Count is a semaphore's available permits, a latch's count, or a rate
	// limiter's permits left in the window (OVERALL).
	Count int64
	// Rate is a rate limiter's configuration.
	Rate Rate
}

// Holder is one entry of KeyInfo: an owner and its count, or a waiter or
// permit and its deadline.
type Holder struct {
	Owner    string
	Count    int64
	Write    bool
	Deadline time.Time
	// Value is a group lock's value field (see GroupLock): the hash of
	// the value, as stored.
	Value string
	// Priority and Since are a priority lock's waiter's priority and
	// arrival, on Redis's clock.
	Priority int
	Since    time.Time
}

// String is the holder as a person reads it: its owner and hold count
// ("<owner> ×2"), a group lock's value before it ("<value>=<owner> ×1"),
// and " (write)" after a write lock's.
func (h Holder) String() string {
	s := h.Owner
	if h.Value != "" {
		s = h.Value + "=" + s
	}
	if h.Count > 0 {
		s += " ×" + strconv.FormatInt(h.Count, 10)
	}
	if h.Write {
		s += " (write)"
	}
	return s
}

// Inspect reads what is at name (mapped by Options.NameMapper; the
// KeyInfo's Name is the key): the kind of lock or synchronizer, its
// holders, TTL, queue and counts. It changes nothing. Kinds that share a
// layout are told apart by the keys beside it (a fair lock's queue, a
// fenced lock's token counter), so a fair or fenced lock that was never
// queued on or fenced shows as "lock".
func (c *Client) Inspect(ctx context.Context, name string) (KeyInfo, error) {
	switch {
	case !c.usable() || ctx == nil || name == "":
		return KeyInfo{}, fmt.Errorf("relock: %w: inspect needs a Client from New, a ctx and a name", ErrInvalidArgument)
	case c.checkOpen() != nil:
		return KeyInfo{}, fmt.Errorf("relock: inspect %q: %w", name, ErrClosed)
	}
	name = c.key(name)
	in := inspection{c: c, ctx: ctx, derived: scripts.DerivedNames(name), info: KeyInfo{Name: name}}
	if err := in.run(); err != nil {
		return KeyInfo{}, redisError("inspect", name, err)
	}
	return in.info, nil
}

// inspection is one Inspect call; its first error stops it.
type inspection struct {
	c       *Client
	ctx     context.Context
	derived scripts.Derived
	info    KeyInfo
	err     error
}

func (in *inspection) do(cmd rueidis.Completed) rueidis.RedisResult {
	if in.err != nil {
		return rueidis.NewErrorResult(in.err)
	}
	r := in.c.rdb.Do(in.ctx, cmd)
	if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
		in.err = err
	}
	return r
}

func (in *inspection) exists(key string) bool {
	n, _ := in.do(in.c.rdb.B().Exists().Key(key).Build()).AsInt64()
	return n > 0
}

func (in *inspection) run() error {
	b, name := in.c.rdb.B(), in.info.Name
	in.info.RedisType, _ = in.do(b.Type().Key(name).Build()).ToString()
	switch in.info.RedisType {
	case "hash":
		in.hash()
	case "string":
		in.count()
	case "none":
		in.absent()
	default:
		in.info.Kind = KindOther
	}
	if in.info.RedisType != "none" {
		in.info.TTL = NoExpiry
		if ms, _ := in.do(b.Pttl().Key(name).Build()).AsInt64(); ms >= 0 {
			in.info.TTL = time.Duration(ms) * time.Millisecond
		}
	}
	switch in.info.Kind {
	case KindFair:
		in.queue()
	case KindPriority:
		in.priorityQueue()
	case KindFenced:
		in.info.Token, _ = in.do(b.Get().Key(in.derived.Token).Build()).AsInt64()
	}
	return in.err
}

// hash reads a lock, a read-write lock or a rate limiter.
func (in *inspection) hash() {
	fields, _ := in.do(in.c.rdb.B().Hgetall().Key(in.info.Name).Build()).AsStrMap()
	if _, ok := fields["rate"]; ok {
		in.rate(fields)
		return
	}
	in.info.Kind, in.info.Mode, in.info.Holders = HoldersOf(fields)
	if in.info.Kind == KindLock {
		in.lockKind()
	}
}

// HoldersOf reads the holders recorded in a lock's hash, given its fields
// as HGETALL returns them: a lock's owners with their hold counts
// (KindLock, whichever lock kind it is), a read-write lock's (KindReadWrite,
// with its mode) or a group lock's values with their owners (KindGroup,
// sorted by value). For a hash of any other shape it returns KindOther and
// no holders.
func HoldersOf(fields map[string]string) (kind Kind, mode string, holders []Holder) {
	if holders, ok := groupHolders(fields); ok {
		return KindGroup, "", holders
	}
	kind = KindLock
	for f, v := range fields {
		if f == "mode" {
			kind, mode = KindReadWrite, v
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		owner, write, ok := holderField(f)
		if err != nil || !ok {
			return KindOther, "", nil
		}
		holders = append(holders, Holder{Owner: owner, Count: n, Write: write})
	}
	return kind, mode, holders
}

// groupHolders reads a group lock's hash (see grouplib.lua): every value
// field names an owner whose expire_time and lock_count fields are there.
// ok is false for any other hash.
func groupHolders(fields map[string]string) (holders []Holder, ok bool) {
	for f, owner := range fields {
		if strings.HasSuffix(f, ":expire_time") || strings.HasSuffix(f, ":lock_count") {
			continue
		}
		if _, err := ParseOwner(owner); err != nil {
			return nil, false
		}
		n, err := strconv.ParseInt(fields[f+":"+owner+":lock_count"], 10, 64)
		if err != nil {
			return nil, false
		}
		end, err := strconv.ParseInt(fields[f+":"+owner+":expire_time"], 10, 64)
		if err != nil {
			return nil, false
		}
		holders = append(holders, Holder{Owner: owner, Count: n, Deadline: time.UnixMilli(end), Value: f})
	}
	if len(holders) == 0 {
		return nil, false
	}
	slices.SortFunc(holders, func(a, b Holder) int { return strings.Compare(a.Value, b.Value) })
	return holders, true
}

// lockKind tells a fair, priority or fenced lock from a plain one by its
// other keys.
func (in *inspection) lockKind() {
	switch {
	case in.exists(in.derived.FairQueue) || in.exists(in.derived.FairTimeouts):
		in.info.Kind = KindFair
	case in.exists(in.derived.PriorityQueue) || in.exists(in.derived.PriorityWaiters):
		in.info.Kind = KindPriority
	case in.exists(in.derived.Token):
		in.info.Kind = KindFenced
	}
}

func (in *inspection) rate(fields map[string]string) {
	in.info.Kind = KindRate
	num := func(f string) int64 { n, _ := strconv.ParseInt(fields[f], 10, 64); return n }
	in.info.Rate = Rate{Permits: num("rate"), Interval: time.Duration(num("interval")) * time.Millisecond,
		PerClient: fields["type"] == "1", KeepAlive: time.Duration(num("keepAliveTime")) * time.Millisecond}
	in.info.Count, _ = in.do(in.c.rdb.B().Get().Key(in.derived.RateValue).Build()).AsInt64()
}

// count reads a semaphore or a latch: a number.
func (in *inspection) count() {
	n, err := in.do(in.c.rdb.B().Get().Key(in.info.Name).Build()).AsInt64()
	if err != nil {
		in.info.Kind = KindOther
		return
	}
	in.info.Count = n
	switch {
	case in.exists(in.derived.PermitTimeouts):
		in.permits()
	case in.listeners(scripts.SemaphoreChannel(in.info.Name)) > 0:
		in.info.Kind = KindSemaphore
	case in.listeners(scripts.LatchChannel(in.info.Name)) > 0:
		in.info.Kind = KindLatch
	default:
		in.info.Kind = KindSemaphoreOrLatch
	}
}

// absent tells what a name without its own key still is: a fair or
// priority lock with a queue, a fenced lock's counter, taken permits.
func (in *inspection) absent() {
	switch {
	case in.exists(in.derived.FairQueue) || in.exists(in.derived.FairTimeouts):
		in.info.Kind = KindFair
	case in.exists(in.derived.PriorityQueue) || in.exists(in.derived.PriorityWaiters):
		in.info.Kind = KindPriority
	case in.exists(in.derived.PermitTimeouts):
		in.permits()
	case in.exists(in.derived.Token):
		in.info.Kind = KindFenced
	}
}

// listeners counts the subscribers of channel (on the node asked, for
// classic pub/sub on a cluster).
func (in *inspection) listeners(channel string) int64 {
	b := in.c.rdb.B()
	cmd := b.PubsubNumsub().Channel(channel).Build()
	if in.c.opts.PubSub == pubsub.Sharded {
		cmd = b.PubsubShardnumsub().Channel(channel).Build()
	}
	n, _ := in.do(cmd).AsIntMap()
	return n[channel]
}

func (in *inspection) permits() {
	in.info.Kind = KindPermitSemaphore
	zs, _ := in.do(in.c.rdb.B().Zrange().Key(in.derived.PermitTimeouts).Min("0").Max("-1").Withscores().Build()).AsZScores()
	for _, z := range zs {
		h := Holder{Owner: fmt.Sprintf("%x", z.Member), Count: 1}
		if z.Score < 922337203685477 {
			h.Deadline = time.UnixMilli(int64(z.Score))
		}
		in.info.Holders = append(in.info.Holders, h)
	}
}

func (in *inspection) queue() {
	b := in.c.rdb.B()
	owners, _ := in.do(b.Lrange().Key(in.derived.FairQueue).Start(0).Stop(-1).Build()).AsStrSlice()
	for _, o := range owners {
		ms, _ := in.do(b.Zscore().Key(in.derived.FairTimeouts).Member(o).Build()).AsFloat64()
		in.info.Queue = append(in.info.Queue, Holder{Owner: o, Deadline: time.UnixMilli(int64(ms))})
	}
}

// priorityQueue reads a priority lock's queue in service order, with each
// waiter's record (see scripts/prioritylib.lua).
func (in *inspection) priorityQueue() {
	b := in.c.rdb.B()
	owners, _ := in.do(b.Zrange().Key(in.derived.PriorityQueue).Min("0").Max("-1").Build()).AsStrSlice()
	if len(owners) == 0 {
		return
	}
	records, _ := in.do(b.Hmget().Key(in.derived.PriorityWaiters).Field(owners...).Build()).ToArray()
	for i, o := range owners {
		h := Holder{Owner: o}
		if i < len(records) {
			r, _ := records[i].ToString()
			if f := strings.Split(r, ":"); len(f) == 5 {
				alive, _ := strconv.ParseInt(f[0], 10, 64)
				h.Priority, _ = strconv.Atoi(f[1])
				since, _ := strconv.ParseInt(f[2], 10, 64)
				h.Deadline, h.Since = time.UnixMilli(alive), time.UnixMicro(since)
			}
		}
		in.info.Queue = append(in.info.Queue, h)
	}
}
