package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/relock-go/relock/reentrant"
)

// Exit codes of run besides CMD's own (see doc.go).
const (
	exitLost        = 75 // sysexits EX_TEMPFAIL: the lock was lost while CMD ran
	exitCannotExec  = 126
	exitNoSuchCmd   = 127
	exitSignalsBase = 128
)

type runFlags struct {
	noWait         bool
	wait           time.Duration
	notAcquired    int
	lease, timeout time.Duration
	fenced         bool
	grace          time.Duration
}

func (f *runFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.noWait, "n", false, "fail at once if the lock is held")
	fs.DurationVar(&f.wait, "w", 0, "wait at most this long for the lock")
	fs.IntVar(&f.notAcquired, "E", 1, "exit `code` when the lock is not acquired")
	fs.DurationVar(&f.lease, "lease", 0, "hold the lock for this long at most, without the watchdog")
	fs.DurationVar(&f.timeout, "watchdog", 30*time.Second, "the watchdog's timeout: the lock's TTL, renewed every third of it")
	fs.BoolVar(&f.fenced, "fenced", false, "take a fenced lock and give CMD its token in RELOCK_TOKEN")
	fs.DurationVar(&f.grace, "grace", 10*time.Second, "after the lock is lost, how long CMD has between SIGTERM and SIGKILL")
}

// lockOptions returns the options of the lock call the flags ask for.
func (f *runFlags) lockOptions() []reentrant.LockOption {
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
	return opts
}

func (e env) run(args []string) int {
	fs, conn := e.flags("run")
	var f runFlags
	f.register(fs)
	rest, ok := e.parse(fs, args)
	if !ok {
		return exitUsage
	}
	if len(rest) > 1 && rest[1] == "--" {
		rest = append(rest[:1], rest[2:]...)
	}
	switch {
	case len(rest) < 2:
		return e.fail(exitUsage, "run needs NAME -- CMD [ARGS...]")
	case f.noWait && f.wait > 0:
		return e.fail(exitUsage, "-n and -w exclude each other")
	case f.wait < 0 || f.lease < 0 || f.grace < 0:
		return e.fail(exitUsage, "durations must not be negative")
	}
	name, argv := rest[0], rest[1:]

	// Signals are caught from the start: while waiting they end the wait;
	// while CMD runs they are passed on to it.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	locks, closeLocks, err := conn.locks(e, reentrant.Options{WatchdogTimeout: f.timeout})
	if err != nil {
		return e.fail(exitFor(err), "%v", err)
	}
	defer closeLocks()
	mu := locks.Lock(name)
	if f.fenced {
		mu = locks.FencedLock(name)
	}
	// The held context descends from ctx: it may end only with the run.
	ctx, cancel := context.WithCancelCause(e.ctx)
	defer cancel(nil)
	held, code := e.take(ctx, cancel, mu, &f, sigs)
	if held == nil {
		return code
	}
	code = e.runHeld(held, name, argv, &f, sigs)
	if err := mu.Unlock(held); err != nil && code != exitLost {
		e.log.Warn("relock: releasing the lock failed; it expires with its TTL", "lock", name, "error", err)
	}
	return code
}

// take takes the lock, or returns the exit code that says why not.
// A signal while waiting cancels ctx with cancel.
func (e env) take(ctx context.Context, cancel context.CancelCauseFunc, mu *reentrant.Lock, f *runFlags, sigs <-chan os.Signal) (context.Context, int) {
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
	held, err := lock(ctx, mu, f)
	close(stop)
	<-exited // from here on, signals are left in sigs for runHeld
	switch {
	case ctx.Err() != nil: // a signal ended the wait, or came as the lock was taken
		if err == nil {
			_ = mu.Unlock(held)
		}
		code := exitUnavailable
		select {
		case code = <-got: // sent before the cancel
		default:
		}
		return nil, e.fail(code, "gave up waiting for %s: %v", mu.Name(), context.Cause(ctx))
	case errors.Is(err, reentrant.ErrNotAcquired):
		return nil, e.fail(f.notAcquired, "%s is held by someone else", mu.Name())
	case err != nil:
		return nil, e.fail(exitUnavailable, "%v", err)
	}
	return held, exitOK
}

// lock takes mu as the flags say: at once (-n), within a time (-w), or
// waiting as long as it takes.
func lock(ctx context.Context, mu *reentrant.Lock, f *runFlags) (context.Context, error) {
	opts := f.lockOptions()
	if !f.noWait && f.wait == 0 {
		return mu.Lock(ctx, opts...)
	}
	held, ok, err := mu.TryLock(ctx, opts...)
	if err == nil && !ok {
		err = reentrant.ErrNotAcquired
	}
	return held, err
}

// runHeld runs CMD while the lock is held and returns run's exit code.
func (e env) runHeld(held context.Context, name string, argv []string, f *runFlags, sigs <-chan os.Signal) int {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = e.stdin, e.stdout, e.stderr
	owner, _ := reentrant.OwnerFrom(held)
	cmd.Env = append(os.Environ(), "RELOCK_NAME="+name, "RELOCK_OWNER="+owner.String())
	if token, ok := reentrant.TokenFrom(held); ok {
		cmd.Env = append(cmd.Env, "RELOCK_TOKEN="+strconv.FormatInt(token, 10))
	}
	if err := cmd.Start(); err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return e.fail(exitNoSuchCmd, "%v", err)
		}
		return e.fail(exitCannotExec, "%v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	lost := held.Done()
	var kill <-chan time.Time
	for {
		select {
		case sig := <-sigs:
			_ = cmd.Process.Signal(sig)
		case <-lost:
			lost = nil
			e.fail(0, "lock %s lost: %v; stopping the command", name, context.Cause(held))
			_ = cmd.Process.Signal(syscall.SIGTERM)
			kill = time.After(f.grace)
		case <-kill:
			_ = cmd.Process.Kill()
		case <-done:
			if lost == nil {
				return exitLost
			}
			return exitStatus(cmd.ProcessState)
		}
	}
}

// exitStatus is CMD's exit status as a shell reports it.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitSignalsBase + int(ws.Signal())
	}
	return ps.ExitCode()
}
