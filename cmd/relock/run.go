package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/election"
)

// Exit codes of run and hold besides CMD's own (see doc.go).
// minWatchdog is the least --watchdog relock takes
// (reentrant.Options.WatchdogTimeout's least).
const minWatchdog = 30 * time.Millisecond

// lockFlags are the flags of run and hold: what to take, and how long to
// wait for it.
type lockFlags struct {
	noWait         bool
	wait           time.Duration
	notAcquired    int
	lease, timeout time.Duration
	fenced, shared bool
	permits        int64
	permitsGiven   bool // --permits 0 is refused, not a plain lock
	progressGiven  bool // --progress-within 0 is refused, not "none"
	values         valueList
	grace          time.Duration
	progress       time.Duration // --progress-within: CMD reports progress this often at least
	verbose        bool
}

func (f *lockFlags) register(fs *flag.FlagSet, run bool) {
	fs.BoolVar(&f.noWait, "n", false, "fail at once if the lock is held")
	fs.DurationVar(&f.wait, "w", 0, "wait at most this long for the lock")
	fs.DurationVar(&f.wait, "wait", 0, "the same as -w")
	fs.IntVar(&f.notAcquired, "E", 1, "exit `code` when the lock is not acquired")
	fs.DurationVar(&f.lease, "lease", 0, "hold the lock for this long at most, without the watchdog")
	fs.DurationVar(&f.timeout, "watchdog", 0, "the watchdog's timeout: the lock's TTL, renewed every third of it (default 30s, or --redisson-config's lockWatchdogTimeout)")
	fs.BoolVar(&f.fenced, "fenced", false, "take a fenced lock and give its token in RELOCK_TOKEN")
	fs.BoolVar(&f.shared, "shared", false, "take the read side of read-write lock NAME: shared with other readers (flock -s)")
	fs.Int64Var(&f.permits, "permits", 0, "take one permit of a permit-expirable semaphore NAME of `N` permits, so that up to N hold it at once (set if NAME has none)")
	fs.Var(&f.values, "value", "take `V` of group lock NAME (Redisson's getMultiLock(NAME, values)); repeat for more values, all taken at once")
	if run {
		fs.DurationVar(&f.grace, "grace", 10*time.Second, "after the lock is lost, how long CMD has between SIGTERM and SIGKILL")
		fs.DurationVar(&f.progress, "progress-within", 0, "CMD reports progress with sd_notify's WATCHDOG=1 at least this often, or it is stopped and the lock given back (exit 124)")
	}
	fs.BoolVar(&f.verbose, "v", false, "say who holds the lock while waiting, and when it is taken and released")
	fs.BoolVar(&f.verbose, "verbose", false, "the same as -v")
}

// check returns what is wrong with the flags' values, if anything.
func (f *lockFlags) check() error {
	kinds := 0
	for _, on := range []bool{f.fenced, f.shared, f.permits != 0, len(f.values) > 0} {
		if on {
			kinds++
		}
	}
	switch {
	case f.noWait && f.wait > 0:
		return errors.New("-n and -w exclude each other")
	case f.progress > 0 && f.permits != 0:
		return errors.New("--progress-within is for a lock, not --permits")
	case kinds > 1:
		return errors.New("--fenced, --shared, --permits and --value exclude each other")
	case f.permits < 0 || f.permitsGiven && f.permits == 0:
		return errors.New("--permits N takes N of 1 or more")
	}
	if err := nonNegative(map[string]time.Duration{"--wait": f.wait, "--lease": f.lease, "--grace": f.grace}); err != nil {
		return err
	}
	return checkHolding(f.timeout, f.progress, f.progressGiven)
}

// nonNegative returns an error naming the first flag, in name order, whose
// duration is negative.
func nonNegative(flags map[string]time.Duration) error {
	for _, name := range slices.Sorted(maps.Keys(flags)) {
		if d := flags[name]; d < 0 {
			return fmt.Errorf("%s %v: durations must not be negative", name, d)
		}
	}
	return nil
}

// given reports whether the flag name was set on the command line.
func given(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	return set
}

// checkHolding checks the flags of run and elect that say how a hold is
// kept: --watchdog and --progress-within (progressGiven: it was given, so
// 0 is not "none" but a deadline too short to keep, as the Go API has it).
func checkHolding(watchdog, progress time.Duration, progressGiven bool) error {
	if err := nonNegative(map[string]time.Duration{"--watchdog": watchdog, "--progress-within": progress}); err != nil {
		return err
	}
	switch {
	case watchdog > 0 && watchdog < minWatchdog:
		return fmt.Errorf("--watchdog %v is below %v", watchdog, minWatchdog)
	case progressGiven && progress < time.Millisecond:
		return fmt.Errorf("--progress-within %v is below 1ms (leave it out for no progress deadline)", progress)
	}
	return nil
}

// lockOptions returns the options of the acquire call the flags ask for.
func (f *lockFlags) lockOptions() []reentrant.LockOption {
	var opts []reentrant.LockOption
	switch {
	case f.noWait:
		opts = append(opts, reentrant.NoWait())
	case f.wait > 0:
		opts = append(opts, reentrant.WaitAtMost(f.wait))
	}
	if f.lease > 0 {
		opts = append(opts, reentrant.LeaseFor(f.lease))
	}
	if f.progress > 0 {
		opts = append(opts, reentrant.ProgressWithin(f.progress))
	}
	return opts
}

// grant is what run and hold take: a hold on a lock, or a permit.
type grant struct {
	held    context.Context // cancelled if it is lost
	owner   string          // the owner, or the permit's id
	release func() error
	env     []string // more of CMD's environment (elect: RELOCK_TERM)
	leads   bool     // the hold is an election's leadership (elect)
}

// ended is run's and elect's one line for a hold that ended under CMD:
// a stall says whose silence it was and what was given up.
func (g grant) ended(name string, progress time.Duration) string {
	cause := context.Cause(g.held)
	switch {
	case errors.Is(cause, reentrant.ErrStalled) && g.leads:
		return fmt.Sprintf("election %q: no progress from the command within %v: leadership given up; stopping the command", name, progress)
	case errors.Is(cause, reentrant.ErrStalled):
		return fmt.Sprintf("lock %q: no progress from the command within %v: the lock given back; stopping the command", name, progress)
	case errors.Is(cause, election.ErrResignRequested):
		return fmt.Sprintf("election %q: asked to resign; stopping the command, then handing over", name)
	case g.leads:
		return fmt.Sprintf("election %q: leadership lost: %v; stopping the command", name, strings.TrimPrefix(cause.Error(), "relock: "))
	}
	return fmt.Sprintf("%v; stopping the command", cause)
}

// taker takes NAME as the flags say.
type taker struct {
	locks *reentrant.Client
	name  string
	f     *lockFlags
}

// take waits for NAME, as long as the flags allow; ok is false when it
// was not acquired within them.
func (t taker) take(ctx context.Context) (g grant, ok bool, err error) {
	opts := t.f.lockOptions()
	waits := !t.f.noWait && t.f.wait == 0 // else a Try call, which has a limit
	if t.f.permits > 0 {
		s := t.locks.PermitExpirableSemaphore(t.name)
		if _, err := s.TrySetPermits(ctx, t.f.permits); err != nil {
			return g, false, err
		}
		p, ok, err := acquire(waits,
			func() (*reentrant.Permit, error) { return s.Acquire(ctx, opts...) },
			func() (*reentrant.Permit, bool, error) { return s.TryAcquire(ctx, opts...) })
		if !ok || err != nil {
			return g, false, err
		}
		return grant{held: p.Context(), owner: p.ID(), release: func() error { return p.Release(context.Background()) }}, true, nil
	}
	mu := t.lock()
	held, ok, err := acquire(waits,
		func() (context.Context, error) { return mu.Lock(ctx, opts...) },
		func() (context.Context, bool, error) { return mu.TryLock(ctx, opts...) })
	if !ok || err != nil {
		return g, false, err
	}
	owner, _ := reentrant.OwnerFrom(held)
	return grant{held: held, owner: owner.String(), release: func() error { return mu.Unlock(held) }}, true, nil
}

// acquire calls wait when the call waits without a limit, else try.
func acquire[T any](waits bool, wait func() (T, error), try func() (T, bool, error)) (T, bool, error) {
	if waits {
		v, err := wait()
		return v, err == nil, err
	}
	return try()
}

// lock is the lock the flags name.
func (t taker) lock() *reentrant.Lock {
	switch {
	case t.f.fenced:
		return t.locks.FencedLock(t.name)
	case t.f.shared:
		return t.locks.ReadWriteLock(t.name).ReadLock()
	case len(t.f.values) > 0:
		return t.locks.GroupLock(t.name, t.f.values...)
	}
	return t.locks.Lock(t.name)
}

// valueList is a repeated flag's values.
type valueList []string

func (v *valueList) String() string { return strings.Join(*v, ",") }

func (v *valueList) Set(s string) error {
	*v = append(*v, s)
	return nil
}

// lockCommand parses the arguments of run or hold (leading: see parse).
// ok is false after it printed why they are wrong; code is the exit code.
func (e env) lockCommand(name string, args []string, leading int) (conn *connFlags, f *lockFlags, rest []string, end exit) {
	fs, conn := e.flags(name)
	f = &lockFlags{}
	f.register(fs, name == "run")
	if rest, end = e.parse(fs, args, leading); end != goOn {
		return nil, nil, nil, end
	}
	f.permitsGiven, f.progressGiven = given(fs, "permits"), given(fs, "progress-within")
	if err := f.check(); err != nil {
		return nil, nil, nil, exit(e.fail(exitUsage, "%v", err))
	}
	return conn, f, rest, goOn
}

func (e env) run(args []string) int {
	conn, f, rest, end := e.lockCommand("run", args, 1)
	if end != goOn {
		return int(end)
	}
	if len(rest) > 1 && rest[1] == "--" {
		rest = append(rest[:1], rest[2:]...)
	}
	if len(rest) < 2 {
		return e.fail(exitUsage, "run needs NAME [--] CMD [ARGS...]")
	}
	return e.underLock(conn, f, rest[0], func(g grant, sigs <-chan os.Signal) int {
		return e.runHeld(g, rest[0], rest[1:], f, sigs)
	})
}

// hold takes NAME and holds it until relock is signalled (SIGINT,
// SIGTERM), as etcdctl lock NAME does; it prints the owner on stdout once
// it holds the lock.
func (e env) hold(args []string) int {
	conn, f, rest, end := e.lockCommand("hold", args, 0)
	if end != goOn {
		return int(end)
	}
	if len(rest) != 1 {
		return e.fail(exitUsage, "hold needs NAME")
	}
	return e.underLock(conn, f, rest[0], func(g grant, sigs <-chan os.Signal) int {
		fmt.Fprintf(e.stdout, "%s held by %s%s\n", rest[0], g.owner, tokenNote(g.held))
		select {
		case <-sigs:
			return exitOK
		case <-g.held.Done():
			e.fail(0, "%v", context.Cause(g.held))
			return exitLost
		}
	})
}

func tokenNote(held context.Context) string {
	if token, ok := reentrant.TokenFrom(held); ok {
		return " with token " + strconv.FormatInt(token, 10)
	}
	return ""
}

// underLock connects, takes NAME, calls body while it is held, and gives
// it back; it returns body's exit code, or why NAME was not taken.
func (e env) underLock(conn *connFlags, f *lockFlags, name string, body func(grant, <-chan os.Signal) int) int {
	// Signals are caught from the start: while waiting they end the wait;
	// while the lock is held body gets them.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	locks, closeLocks, err := conn.locks(e, reentrant.Options{WatchdogTimeout: f.timeout})
	if err != nil {
		return e.fail(exitFor(err), "%v", err)
	}
	defer closeLocks()
	t := taker{locks: locks, name: name, f: f}
	// The held context descends from ctx: it may end only with the command.
	ctx, cancel := context.WithCancelCause(e.ctx)
	defer cancel(nil)
	start := time.Now()
	if f.verbose {
		e.sayHolders(ctx, locks, name)
	}
	g, code := e.take(ctx, cancel, name, f.notAcquired, t.take, sigs)
	if g.held == nil {
		return code
	}
	if f.verbose {
		e.say("%s taken after %v, as %s", name, time.Since(start).Round(time.Millisecond), g.owner)
	}
	code = body(g, sigs)
	err = g.release()
	switch {
	case code == exitLost, code == exitStalled:
	case errors.Is(err, reentrant.ErrLockLost), errors.Is(err, reentrant.ErrLeaseEnded):
		e.fail(0, "lock %s: %v", name, err)
	case err != nil:
		e.fail(0, "releasing %s failed; it expires with its TTL: %v", name, err)
	case f.verbose:
		e.say("%s released", name)
	}
	return code
}

// say prints a progress line for --verbose.
func (e env) say(format string, args ...any) {
	fmt.Fprintf(e.stderr, "relock: "+format+"\n", args...)
}

// sayHolders tells, for --verbose, who holds name now, if anyone.
func (e env) sayHolders(ctx context.Context, locks *reentrant.Client, name string) {
	info, err := locks.Inspect(ctx, name)
	if err != nil || len(info.Holders) == 0 {
		return
	}
	var who []string
	for _, h := range info.Holders {
		who = append(who, h.Owner)
	}
	e.say("%s is held by %v; waiting", name, who)
}

// take takes name with get, or returns the exit code that says why not
// (notAcquired when get did not acquire it within its limits). A signal
// while waiting cancels ctx with cancel.
func (e env) take(ctx context.Context, cancel context.CancelCauseFunc, name string, notAcquired int, get func(context.Context) (grant, bool, error), sigs <-chan os.Signal) (grant, int) {
	stop, exited := make(chan struct{}), make(chan struct{})
	got := make(chan int, 1)
	go func() {
		defer close(exited)
		select {
		case sig := <-sigs:
			got <- exitSignalsBase + int(sig.(syscall.Signal))
			cancel(errors.New("interrupted by " + sig.String()))
		case <-stop:
		}
	}()
	g, ok, err := get(ctx)
	close(stop)
	<-exited // from here on, signals are left in sigs for the holder
	switch {
	case ctx.Err() != nil: // a signal ended the wait, or came as the lock was taken
		if ok {
			_ = g.release()
		}
		code := exitUnavailable
		select {
		case code = <-got: // sent before the cancel
		default:
		}
		return grant{}, e.fail(code, "gave up waiting for %s: %v", name, context.Cause(ctx))
	case err != nil:
		return grant{}, e.fail(exitFor(err), "%v", err)
	case !ok:
		return grant{}, e.fail(notAcquired, "%s is held by someone else", name)
	}
	return g, exitOK
}

// runHeld runs CMD while the lock is held and returns run's exit code.
func (e env) runHeld(g grant, name string, argv []string, f *lockFlags, sigs <-chan os.Signal) int {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = e.stdin, e.stdout, e.stderr
	cmd.Env = append(append(os.Environ(), "RELOCK_NAME="+name, "RELOCK_OWNER="+g.owner), g.env...)
	if token, ok := reentrant.TokenFrom(g.held); ok {
		cmd.Env = append(cmd.Env, "RELOCK_TOKEN="+strconv.FormatInt(token, 10))
	}
	var cleanup string // what the guard removes if relock dies
	if f.progress > 0 {
		sock, err := listenNotify(f.progress)
		if err != nil {
			return e.fail(exitUnavailable, "--progress-within: %v", err)
		}
		defer sock.close()
		cmd.Env, cleanup = sock.env(cmd.Env), sock.dir
		go sock.serve(g.held)
	}
	c, err := startCommand(cmd, cleanup)
	if err != nil {
		return e.fail(startError(err), "%v", err)
	}
	done := make(chan int, 1)
	go func() { done <- c.wait() }()

	lost, lostCode := g.held.Done(), exitLost
	var kill <-chan time.Time
	for {
		select {
		case sig := <-sigs:
			c.signal(sig)
		case <-lost:
			lost = nil
			if errors.Is(context.Cause(g.held), reentrant.ErrStalled) {
				lostCode = exitStalled
			}
			e.fail(0, "%s", g.ended(name, f.progress))
			c.signal(syscall.SIGTERM)
			kill = time.After(f.grace)
		case <-kill:
			c.kill()
		case status := <-done:
			if lost == nil {
				return lostCode
			}
			return status
		}
	}
}
