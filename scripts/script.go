package scripts

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"errors"
	"net"
	"regexp"
	"strings"

	"github.com/redis/rueidis"
)

// script is one Lua script, run by its SHA1 and sent whole only when the
// server does not know it. rueidis's own Lua type would do for single calls,
// but pipelines of scripts (and WAIT on the same connection) need the
// commands themselves.
type script struct {
	body string
	sha  string
	many *script // the same body for many calls at once (see coalescible)
}

// newScript composes a script from parts: the libraries it takes (clockLib
// first, then its family's), then its own body. What two families share is
// a library of its own, not a copy.
func newScript(parts ...string) *script {
	body := strings.Join(parts, "")
	sum := sha1.Sum([]byte(body))
	return &script{body: body, sha: hex.EncodeToString(sum[:])}
}

func (s *script) evalsha(c Conn, keys, args []string) rueidis.Completed {
	return c.B().Evalsha().Sha1(s.sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
}

func (s *script) eval(c Conn, keys, args []string) rueidis.Completed {
	return c.B().Eval().Script(s.body).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
}

// exec runs the script once. NOSCRIPT means the script did not run, so
// sending it again as EVAL is safe; nothing else is resent. On a synced [Conn]
// client, syncErr says whether replicas confirmed the script's writes.
func (s *script) exec(ctx context.Context, c Conn, keys, args []string) (r rueidis.RedisResult, syncErr error) {
	if c.Replicas != 0 {
		return s.execSynced(ctx, c, keys, args)
	}
	if c.Coalesce != nil && s.many != nil {
		return c.Coalesce.do(ctx, s, keys, args), nil
	}
	return s.execOne(ctx, c, keys, args), nil
}

// execOne runs the script once, as a call of its own: EVALSHA, and EVAL
// after NOSCRIPT (the script did not run).
func (s *script) execOne(ctx context.Context, c Conn, keys, args []string) rueidis.RedisResult {
	r := s.send(ctx, c, keys, args, false)
	if isNoScript(r.Error()) {
		r = s.send(ctx, c, keys, args, true)
	}
	return r
}

// send sends one EVALSHA (or EVAL), and once more when another call's
// dial or greeting failed it unsent: either may be the first call on a
// connection rueidis has yet to open. A send consumes its command, so the
// second is built anew.
func (s *script) send(ctx context.Context, c Conn, keys, args []string, eval bool) rueidis.RedisResult {
	r := c.one(ctx, s.command(c, keys, args, eval))
	if unsent(ctx, r) {
		r = c.one(ctx, s.command(c, keys, args, eval))
	}
	return r
}

func (s *script) command(c Conn, keys, args []string, eval bool) rueidis.Completed {
	if eval {
		return s.eval(c, keys, args)
	}
	return s.evalsha(c, keys, args)
}

// one sends a call of its own: on the lone wire when the client has no
// other call in flight (see loneWires), else on its shared connections.
func (c Conn) one(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if c.Coalesce != nil && c.Coalesce.lone != nil {
		return c.Coalesce.lone.do(ctx, cmd)
	}
	return c.Do(ctx, cmd)
}

// call is one run of a script in a pipeline.
type call struct {
	keys, args []string
}

// execMulti runs the calls in one pipeline, then resends as EVAL, again in
// one pipeline, just the calls the server answered with NOSCRIPT.
// On a synced [Conn] client each call gets its own WAIT, and a call whose writes
// replicas did not confirm gets an error result.
func (s *script) execMulti(ctx context.Context, c Conn, calls []call) []rueidis.RedisResult {
	if c.Replicas != 0 {
		return s.execMultiSynced(ctx, c, calls)
	}
	cmds := make(rueidis.Commands, len(calls))
	for i, cl := range calls {
		cmds[i] = s.evalsha(c, cl.keys, cl.args)
	}
	results := c.DoMulti(ctx, cmds...)
	var again []int
	for i, r := range results {
		if isNoScript(r.Error()) {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return results
	}
	cmds = cmds[:0]
	for _, i := range again {
		cmds = append(cmds, s.eval(c, calls[i].keys, calls[i].args))
	}
	for j, r := range c.DoMulti(ctx, cmds...) {
		results[again[j]] = r
	}
	return results
}

// IsNoPermission reports whether err is an ACL refusal: NOPERM from a
// command, or a script's report that the user may not run a command or
// use a channel, in Redis's words or in Valkey's.
func IsNoPermission(err error) bool {
	if err == nil || !IsReply(err) {
		return false
	}
	msg := err.Error()
	return strings.HasPrefix(msg, "NOPERM") ||
		strings.Contains(msg, "The user executing the script can't") || // Redis 7
		strings.Contains(msg, "ACL failure in script") // Valkey 8
}

// scriptTrailer is what Redis appends to an error raised inside a script:
// the script's hash and line, which tell a user nothing.
var scriptTrailer = regexp.MustCompile(` script: [0-9a-f]{40}, on @user_script:\d+\.$`)

// tidyReply is a reply error with its script trailer cut off; the reply
// itself stays in the chain, for errors.As and errors.Is.
type tidyReply struct {
	msg   string
	reply error
}

func (e tidyReply) Error() string { return e.msg }
func (e tidyReply) Unwrap() error { return e.reply }

// Tidy cuts the script trailer off err's text, keeping err in the chain.
func Tidy(err error) error {
	if msg := err.Error(); scriptTrailer.MatchString(msg) {
		return tidyReply{scriptTrailer.ReplaceAllString(msg, ""), err}
	}
	return err
}

func isNoScript(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && re.IsNoScript()
}

// NotSent reports whether err says the command never left the client: the
// connection could not be dialled, or the call was cut short while it
// queued behind others (see Coalescer). Such a script did not run.
func NotSent(err error) bool {
	var op *net.OpError
	return errors.Is(err, errUnsent) || errors.As(err, &op) && op.Op == "dial"
}

// The codes of the error replies relock's own scripts return: the reply's
// first word. Go code tells these errors apart by code (see Code), not by
// text: the text of a Lua error changes with the server (Valkey 9.1
// rewords them).
const (
	// CodeRateNotSet: the rate limiter has no configuration.
	CodeRateNotSet = "RELOCK_RATE_NOT_SET"
	// CodeRateExceeded: more permits were asked than the rate.
	CodeRateExceeded = "RELOCK_RATE_EXCEEDED"
	// CodeReentry: the owner holds the non-reentrant lock already.
	CodeReentry = "RELOCK_REENTRY"
)

// Code returns the code of an error reply from one of relock's scripts
// (one of the Code constants), or "" for any other error.
func Code(err error) string {
	var re *rueidis.RedisError
	if !errors.As(err, &re) || re.IsNil() {
		return ""
	}
	code, _, _ := strings.Cut(re.Error(), " ")
	if !strings.HasPrefix(code, "RELOCK_") {
		return ""
	}
	return code
}

// countLib is prepended to the scripts of the synchronizers that keep a
// count in their key: they fail with a WRONGTYPE reply naming what the key
// holds, before they change anything, when it holds anything else (see
// countlib.lua).
//
//go:embed countlib.lua
var countLib string

// clockLib is the server's clock, read once per script (clocklib.lua).
//
//go:embed clocklib.lua
var clockLib string

// tokenLib checks and draws fencing tokens (tokenlib.lua); it needs
// clockLib.
//
//go:embed tokenlib.lua
var tokenLib string

// latchLib reads and writes Redisson's unlock latch, for every release
// script (latchlib.lua).
//
//go:embed latchlib.lua
var latchLib string

// lockLib reads a lock hash for the plain and non-reentrant acquire
// scripts, once per script for each lock (locklib.lua).
//
//go:embed locklib.lua
var lockLib string

// holdLib gives back one hold on Redisson's RLock hash, the middle of the
// plain, fair and priority locks' release scripts (holdlib.lua).
//
//go:embed holdlib.lua
var holdLib string

// grantLib gives a free fair or priority lock to a queued relock waiter
// and lets it take the grant (grantlib.lua); it comes before fairLib and
// priorityLib, which use it.
//
//go:embed grantlib.lua
var grantLib string

// IsWrongType reports whether err says a key holds another type of value
// than the script expects.
func IsWrongType(err error) bool {
	var re *rueidis.RedisError
	return errors.As(err, &re) && strings.Contains(re.Error(), "WRONGTYPE")
}
