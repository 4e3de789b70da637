package scripts

import (
	"context"
	_ "embed"
	"strings"
	"time"
)

// wakeLib holds the functions of directed wakes; it is prepended to the
// scripts that use them.
//
//go:embed wakelib.lua
var wakeLib string

var (
	//go:embed passon.lua
	passOnLua    string
	passOnScript = newScript(wakeLib + passOnLua)
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
// left to take it, leaves the waiters' set, and the next client is told.
func PassOn(ctx context.Context, c Conn, name, client string, pub Publish) error {
	r, _ := passOnScript.exec(ctx, c, []string{name, waiters(name)}, []string{client, string(pub)})
	return r.Error()
}
