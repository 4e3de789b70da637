package scripts

import (
	"context"
	_ "embed"
	"strconv"
	"strings"
	"time"

	"github.com/relock-go/relock/pubsub"
)

// wakeLib holds the functions of directed wakes; it is prepended to the
// scripts that use them.
//
//go:embed wakelib.lua
var wakeLib string

var (
	//go:embed passon.lua
	passOnLua    string
	passOnScript = newScript(clockLib, wakeLib, passOnLua)

	//go:embed giveback.lua
	giveBackLua    string
	giveBackScript = newScript(clockLib, wakeLib, giveBackLua)
)

// Wake is a waiting client's part in a plain or fenced lock's directed
// wakes, relock's addition to Redisson's protocol: relock clients that wait
// register in the lock's waiters' set, relock_waiters:{name}, each listens
// on its own channel (WakeChannel), and a release tells the one registered
// longest, besides publishing on Redisson's channel as Redisson does.
type Wake struct {
	Client string // the client's id
	// Register, when not zero, registers the client for that long (or as
	// long as the set lives) when the acquire fails.
	Register time.Duration
	// Settle is what an acquire that succeeds does with the client's
	// registration.
	Settle Settle
	// OfferFirst, when not 0, is the first owner number of the client's
	// offer, OfferFirst to OfferLast (see Offer), for a caller that takes
	// handoffs: a failed acquire that registers offers them for the
	// acquire's lease; one that finds the lock given to OfferFirst answers
	// Acquired.Handed; one that succeeds with SettleDrop drops the offer
	// with the registration. A plain lock's acquire only (LockAcquire),
	// with Offers.
	OfferFirst, OfferLast int64
	// Offers: the lock keeps offers (a plain lock): an acquire that drops
	// the client drops its offer too.
	Offers bool
	// Listens, with Offers and SettleDrop, is how long at least the client
	// will still listen on Redisson's channel once the waiter leaves (see
	// Offer.Listens).
	Listens time.Duration
}

// Offer is a client's offer to take a plain lock straight from a release
// (a handoff, relock's own; see handOn in wakelib.lua): a release that
// frees the lock, finding the client at the head of the waiters' set, gives
// it the lock as owner Client + ":" + N, with what is left of Lease,
// counted from when the offer was last written, as its TTL, and publishes
// pubsub.Granted + ":" + N on the client's wake channel. The offer then
// moves on to N+1, up to Last, so that the client's waiters take handoffs
// one after another with no new offer written. The offers live in
// relock_grants:{name} (field: the client's id), kept Keep more by each
// write, as the waiters' set is by each registration (Wake.Register). An
// owner number is given at most once.
//
// A release hands the lock on only when its message on Redisson's channel
// reached no one but the relock clients that may listen there: the
// registered ones, those that stopped waiting less than their Listens ago
// (they stay in the set as marks until then), and the releasing client if
// it Listens. Anyone else may be a Java waiter, which must have its chance.
type Offer struct {
	Client  string
	N, Last int64
	Lease   time.Duration
	Keep    time.Duration
	// Listens is how long at least the releasing client will still listen
	// on Redisson's channel (it waited on the lock lately; see
	// pubsub.Subscriber.ListensFor), 0 when it does not: then it offers
	// nothing, and is not registered.
	Listens time.Duration
	// Drop: the releasing client has no waiter left; a release that frees
	// the lock takes it out of the waiters' set, where a handoff (which
	// moves the client to the end) or an attempt may have left it, and
	// marks it for Listens.
	Drop bool
}

// Settle is what becomes of a client's registration when one of its
// waiters takes the lock.
type Settle byte

// The settlements.
const (
	SettleKeep    Settle = '0' // left as it is (the attempt never registered)
	SettleDrop    Settle = '1' // dropped: the client has no other waiter
	SettleRequeue Settle = '2' // moved to the end: the client has other waiters
)

// with fills the directed-wake slots at the ends of an acquire script's
// keys and args (the waiters' set; the client, settlement and registration),
// or cuts them off when w has no Client.
func (w Wake) with(keys, args []string, key string) ([]string, []string) {
	if w.Client == "" {
		return keys[:len(keys)-1], args[:len(args)-3]
	}
	keys[len(keys)-1] = waiters(key)
	n := len(args)
	args[n-3], args[n-2], args[n-1] = w.Client, string(w.Settle), millis(w.Register)
	return keys, args
}

// waiters returns the key of lock name's waiters' set: relock_waiters:{name}.
func waiters(name string) string { return prefixed("relock_waiters", name) }

// waitersAndGrants returns waiters(name) and grants(name) in one
// allocation: every plain lock's release sends both.
func waitersAndGrants(name string) (w, g string) {
	tagged := name // see prefixed
	open, shut := "{", "}"
	if strings.Contains(name, "{") {
		open, shut = "", ""
	}
	both := "relock_waiters:" + open + tagged + shut + "relock_grants:" + open + tagged + shut
	n := len(both) - len("relock_grants:"+open+shut) - len(tagged)
	return both[:n], both[n:]
}

// WakeChannel returns the channel on which client hears the directed wakes
// of lock name: relock_wake:{name}:<client> (wakelib.lua builds it from the
// waiters' set's name).
func WakeChannel(name, client string) string {
	if strings.Contains(name, "{") { // prefixed, in one allocation
		return "relock_wake:" + name + ":" + client
	}
	return "relock_wake:{" + name + "}:" + client
}

// PassOn runs passon.lua: client, told of a free lock name with no waiter
// left to take it, leaves the waiters' set (marked for listens, see
// Offer.Listens), and the next client is told.
func PassOn(ctx context.Context, c Conn, name, client string, pub Publish, listens time.Duration) error {
	r, _ := passOnScript.exec(ctx, c, []string{name, waiters(name), grants(name)}, []string{client, string(pub), millis(listens)})
	return r.Error()
}

// GiveBack runs giveback.lua: client withdraws its offer of owner numbers n
// to last for plain lock name (see Offer), which none of its waiters will
// take, and releases the lock if a release gave it to one of those owners
// already, handing it on; listens: how long at least the client will
// still listen on Redisson's channel (see Offer.Listens); drop: it has no
// waiter left, and leaves the waiters' set. It reports whether it released
// the lock.
func GiveBack(ctx context.Context, c Conn, name, client string, n, last int64, pub Publish, listens time.Duration, drop bool) (bool, error) {
	keys := []string{name, LockChannel(name), waiters(name), grants(name)}
	args := []string{client, offerArg(n, last), string(pub), pubsub.WakeTold, millis(listens), flag(drop)}
	r, _ := giveBackScript.exec(ctx, c, keys, args)
	released, err := r.AsInt64()
	return released == 1, err
}

// offerArg is an offer of owner numbers n to last as the scripts take it,
// "<n>:<last>" (see offer in wakelib.lua).
func offerArg(n, last int64) string {
	return strconv.FormatInt(n, 10) + ":" + strconv.FormatInt(max(last, n), 10)
}
