package scripts

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/scripts/internal/coalesce"
)

// many.lua runs a script's body once per call (see coalescible).
//
//go:embed many.lua
var manyLua string

// coalescible composes a script as newScript does, libraries then body,
// and beside it the script that runs the body for many calls at once: the
// body becomes the function one(KEYS, ARGV), which many.lua calls for each.
// A library that reads KEYS or ARGV (countLib, rateLib, permitLib) belongs
// to the body: outside one, it would read the whole call's.
func coalescible(libs []string, body ...string) *script {
	for _, lib := range libs {
		if readsCallArgs(lib) {
			panic("scripts: a library outside a coalescible script's body reads KEYS or ARGV")
		}
	}
	s := newScript(append(libs, body...)...)
	many := append(libs, "local function one(KEYS, ARGV)\n")
	many = append(append(many, body...), "\nend\n", manyLua)
	s.many = newScript(many...)
	return s
}

// readsCallArgs reports whether Lua code, its comments aside, names KEYS
// or ARGV.
func readsCallArgs(lua string) bool {
	for line := range strings.Lines(lua) {
		code, _, _ := strings.Cut(line, "--")
		if strings.Contains(code, "KEYS") || strings.Contains(code, "ARGV") {
			return true
		}
	}
	return false
}

// maxCoalesced is the most calls one script call carries: about as many as
// the goroutines of a busy client, and a script that runs well under a
// millisecond.
const maxCoalesced = 64

// Coalescer coalesces one client's calls of the commonest scripts (a plain
// or non-reentrant lock's acquire, a plain lock's release): while one is
// in flight, the calls that come queue, and go as one call of many.lua
// when it ends. What each lock's keys see is what its call alone would
// have done: same commands, same replies, in the order the calls came.
//
// On a cluster client only calls in one hash slot go together. On any
// other they go together whatever their slots, until the server refuses
// such a call with CROSSSLOT (a cluster proxy, which looks like one node):
// the refused calls are sent one by one (the refusal ran nothing), and
// from then on only calls in one slot go together, as the watchdog's
// renewals do.
//
// A call of its own (alone on its line, or any script not coalesced) goes
// on the lone wire when the client has no other in flight: see loneWires.
type Coalescer struct {
	client    rueidis.Client
	spanSlots atomic.Bool
	lines     coalesce.Lines[line, call, rueidis.RedisResult]
	lone      *loneWires // nil on a cluster client
}

// line is what calls must share to go together: the script, and the hash
// slot where slots may not be mixed.
type line struct {
	s    *script
	slot uint16
}

// NewCoalescer returns the coalescer of calls on client, which Conn.Coalesce
// then names; cluster says it is a cluster client. start runs a goroutine
// that the client's Close waits for (false once closing); closing ends
// with Close.
func NewCoalescer(client rueidis.Client, cluster bool, closing context.Context, start func(func()) bool) *Coalescer {
	co := &Coalescer{client: client}
	if !cluster {
		co.lone = newLoneWires(client)
		// Closed on a goroutine Close waits for, not in an AfterFunc's:
		// closing a dedicated wire may talk to the server, which must not
		// outlive the client.
		if !start(func() { <-closing.Done(); co.lone.close() }) {
			co.lone.close()
		}
	}
	co.spanSlots.Store(!cluster)
	co.lines = coalesce.Lines[line, call, rueidis.RedisResult]{
		Many:    co.many,
		Cut:     cut,
		Start:   start,
		Closing: closing,
		Max:     maxCoalesced,
	}
	return co
}

// do runs s for keys and args, alone or coalesced.
func (co *Coalescer) do(ctx context.Context, s *script, keys, args []string) rueidis.RedisResult {
	ln := line{s: s}
	if !co.spanSlots.Load() {
		ln.slot = Slot(keys[0]) // a call's keys share its slot
	}
	return co.lines.Do(ctx, ln, call{keys: keys, args: args}, func(ctx context.Context, cl call) rueidis.RedisResult {
		return s.execOne(ctx, Conn{Client: co.client, Coalesce: co}, cl.keys, cl.args)
	})
}

// many sends calls as one call of ln's script for many, and returns each
// call's reply, or the one error every call then shares.
func (co *Coalescer) many(ctx context.Context, ln line, calls []call) []rueidis.RedisResult {
	c := Conn{Client: co.client, Coalesce: co}
	if len(calls) == 1 {
		return []rueidis.RedisResult{ln.s.execOne(ctx, c, calls[0].keys, calls[0].args)}
	}
	nk, na := 0, 1+2*len(calls)
	for _, cl := range calls {
		nk, na = nk+len(cl.keys), na+len(cl.args)
	}
	keys, args := make([]string, 0, nk), make([]string, 1+2*len(calls), na)
	args[0] = strconv.Itoa(len(calls))
	for i, cl := range calls {
		keys = append(keys, cl.keys...)
		args[1+2*i], args[2+2*i] = strconv.Itoa(len(cl.keys)), strconv.Itoa(len(cl.args))
		args = append(args, cl.args...)
	}
	res := ln.s.many.execOne(ctx, c, keys, args)
	replies := make([]rueidis.RedisResult, len(calls))
	msgs, err := res.ToArray()
	switch {
	case err == nil && len(msgs) != len(calls):
		err = fmt.Errorf("many.lua: %d replies for %d calls", len(msgs), len(calls))
	case IsReply(err) && strings.Contains(err.Error(), "CROSSSLOT"):
		// Refused whole, so nothing ran: each call goes alone, once.
		co.spanSlots.Store(false)
		return ln.s.execMulti(ctx, c, calls)
	}
	for i := range replies {
		if err != nil {
			replies[i] = rueidis.NewErrorResult(err)
		} else {
			replies[i] = rueidis.NewResult(msgs[i], nil)
		}
	}
	return replies
}

// errUnsent marks a coalesced call that its caller's ctx (or the client's
// Close) cut short before it was sent: it did not run (see NotSent).
var errUnsent = errors.New("relock: the call was not sent")

// cut is the result of a coalesced call that ctx or Close cut short.
func cut(err error, sent bool) rueidis.RedisResult {
	if !sent {
		err = fmt.Errorf("%w: %w", errUnsent, err)
	}
	return rueidis.NewErrorResult(err)
}
