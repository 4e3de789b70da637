package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/election"
)

// electFlags are elect's flags.
type electFlags struct {
	value    string
	keep     bool
	timeout  time.Duration
	grace    time.Duration
	progress time.Duration
	verbose  bool
}

func (f *electFlags) register(fs *flag.FlagSet) {
	host, _ := os.Hostname()
	fs.StringVar(&f.value, "value", host+":"+strconv.Itoa(os.Getpid()), "what the leader proclaims (relock leader shows it)")
	fs.BoolVar(&f.keep, "keep", false, "after leadership is lost and CMD stopped, campaign again and run CMD again")
	fs.DurationVar(&f.timeout, "watchdog", 0, "the watchdog's timeout: how long a dead leader keeps leading (default 30s)")
	fs.DurationVar(&f.grace, "grace", 10*time.Second, "after leadership is lost, how long CMD has between SIGTERM and SIGKILL")
	fs.DurationVar(&f.progress, "progress-within", 0, "CMD reports progress with sd_notify's WATCHDOG=1 at least this often, or it is stopped and leadership given up (exit 124)")
	fs.BoolVar(&f.verbose, "v", false, "say when leading starts and ends")
	fs.BoolVar(&f.verbose, "verbose", false, "the same as -v")
}

// elect campaigns in election NAME and runs CMD while leading, as run does
// under a lock: CMD gets RELOCK_TERM (and RELOCK_TOKEN, the same), and is
// stopped (SIGTERM, --grace, SIGKILL; exit 75) when leadership is lost or
// relock leader --request-resign asks the leader to step down; with --keep
// relock then campaigns again. When CMD ends (SIGTERM included), the
// leader resigns to the candidate standing longest.
func (e env) elect(args []string) int {
	fs, conn := e.flags("elect")
	f := &electFlags{}
	f.register(fs)
	rest, end := e.parse(fs, args, 1)
	if end != goOn {
		return int(end)
	}
	if len(rest) > 1 && rest[1] == "--" {
		rest = append(rest[:1], rest[2:]...)
	}
	if len(rest) < 2 {
		return e.fail(exitUsage, "elect needs NAME [--] CMD [ARGS...]")
	}
	if err := checkHolding(f.timeout, f.progress, given(fs, "progress-within")); err != nil {
		return e.fail(exitUsage, "%v", err)
	}
	if err := nonNegative(map[string]time.Duration{"--grace": f.grace}); err != nil {
		return e.fail(exitUsage, "%v", err)
	}
	name, argv := rest[0], rest[1:]
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	locks, closeAll, err := conn.locks(e, reentrant.Options{WatchdogTimeout: f.timeout})
	if err != nil {
		return e.fail(exitFor(err), "%v", err)
	}
	defer closeAll()
	el := election.New(locks, name, election.Options{ProgressWithin: f.progress})
	for {
		code := e.leadOnce(el, name, argv, f, sigs)
		if code != exitLost && code != exitStalled || !f.keep {
			return code
		}
	}
}

// leadOnce campaigns, runs CMD while leading, and resigns.
func (e env) leadOnce(el *election.Election, name string, argv []string, f *electFlags, sigs <-chan os.Signal) int {
	ctx, cancel := context.WithCancelCause(e.ctx)
	defer cancel(nil)
	campaign := func(ctx context.Context) (grant, bool, error) {
		leading, term, err := el.Campaign(ctx, f.value)
		if err != nil {
			return grant{}, false, err
		}
		owner, _ := reentrant.OwnerFrom(leading)
		// ToNext: a leader stopped by SIGTERM (a rolling deploy) hands
		// over to the candidate standing longest, which leads within a
		// wake-up; a request to resign names its own successor.
		resign := func() error {
			if errors.Is(context.Cause(leading), election.ErrResignRequested) {
				return el.Resign(leading)
			}
			return el.Resign(leading, election.ToNext())
		}
		return grant{held: leading, owner: owner.String(), release: resign, leads: true,
			env: []string{"RELOCK_TERM=" + strconv.FormatInt(int64(term), 10)}}, true, nil
	}
	g, code := e.take(ctx, cancel, name, exitNotFound, campaign, sigs)
	if g.held == nil {
		return code
	}
	if f.verbose {
		term, _ := reentrant.TokenFrom(g.held)
		e.say("%s: leading in term %d as %s", name, term, g.owner)
	}
	code = e.runHeld(g, name, argv, &lockFlags{grace: f.grace, progress: f.progress}, sigs)
	err := g.release()
	switch {
	case code == exitLost, code == exitStalled:
	case err != nil:
		e.fail(0, "%v", err)
	case f.verbose:
		e.say("%s: resigned", name)
	}
	return code
}

// leader prints who leads election NAME; with --watch, every change until
// signalled, and every time it cannot see who leads (Redis unreachable,
// a read refused), until it sees again.
func (e env) leader(args []string) int {
	fs, conn := e.flags("leader")
	watch := fs.Bool("watch", false, "print every change of leader (or of candidates) until interrupted")
	asJSON := fs.Bool("json", false, "print JSON: name, leading, value, owner, term, since, error (one object per line)")
	candidates := fs.Bool("candidates", false, "list the live candidates, the one standing longest first")
	request := fs.Bool("request-resign", false, "ask the leader to resign, handing over to --to or to the candidate standing longest")
	to := fs.String("to", "", "with --request-resign: the owner of the candidate to hand over to (relock leader --candidates shows them)")
	rest, end := e.parse(fs, args, 0)
	if end != goOn {
		return int(end)
	}
	if len(rest) != 1 {
		return e.fail(exitUsage, "leader takes one NAME, not %d: %s", len(rest), strings.Join(rest, " "))
	}
	name := rest[0]
	locks, closeAll, err := conn.locks(e, reentrant.Options{})
	if err != nil {
		return e.fail(exitFor(err), "%v", err)
	}
	defer closeAll()
	el := election.New(locks, name, election.Options{})
	switch {
	case *request:
		return e.requestResign(el, name, *to, *asJSON)
	case *to != "":
		return e.fail(exitUsage, "--to goes with --request-resign")
	case *candidates:
		return e.candidates(el, name, *watch, *asJSON)
	}
	show := func(o election.Observed) { writeLeader(e.stdout, name, o, *asJSON) }
	if *watch {
		ctx, stop := signal.NotifyContext(e.ctx, syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		var last error
		for o := range el.Observe(ctx) {
			show(o)
			last = o.Err
		}
		if ctx.Err() == nil && last != nil {
			return exitFor(last)
		}
		return exitOK
	}
	l, err := el.Leader(e.ctx)
	switch {
	case errors.Is(err, election.ErrNoLeader):
		return e.leaseLeader(locks, name, l, *asJSON)
	case err != nil:
		return e.fail(exitFor(err), "%v", err)
	}
	show(election.Observed{Leader: l})
	return exitOK
}

// leaseLeader shows who leads name by its client-go lease record, where
// relock's election has no leader: a controller elected by client-go's
// elector on kube.NewResourceLock keeps no election record.
func (e env) leaseLeader(locks *reentrant.Client, name string, l election.Leader, asJSON bool) int {
	lease, err := leaseOf(e.ctx, locks, name)
	switch {
	case err != nil:
		return e.fail(exitFor(err), "%v", err)
	case lease == nil:
		writeLeader(e.stdout, name, election.Observed{Leader: l}, asJSON)
		return exitNotFound
	}
	if asJSON {
		j := leaderJSON{Name: name, Leading: lease.Live, Value: lease.Holder, Term: lease.Term, Lease: lease}
		if !lease.Live {
			j.Value = ""
		}
		b, _ := json.Marshal(j)
		fmt.Fprintln(e.stdout, string(b))
	} else {
		fmt.Fprintf(e.stdout, "%s: ", name)
		lease.write(e.stdout)
	}
	if !lease.Live {
		return exitNotFound
	}
	return exitOK
}

// writeLeader writes what leader shows of o: a line of text, or of JSON.
func writeLeader(w io.Writer, name string, o election.Observed, asJSON bool) {
	if asJSON {
		b, _ := json.Marshal(leaderJSONOf(name, o))
		fmt.Fprintln(w, string(b))
		return
	}
	l := o.Leader
	switch {
	case o.Err != nil && l.Owner != "":
		fmt.Fprintf(w, "%s: cannot see who leads (last seen: %s in term %d): %v\n", name, l.Value, l.Term, o.Err)
	case o.Err != nil:
		fmt.Fprintf(w, "%s: cannot see who leads: %v\n", name, o.Err)
	case l.Owner == "":
		fmt.Fprintf(w, "%s: nobody leads\n", name)
	default:
		fmt.Fprintf(w, "%s: %s leads in term %d, owner %s, since %s\n", name, l.Value, l.Term, l.Owner, l.Since.UTC().Format(time.RFC3339Nano))
	}
}

// leaderJSON is leader's --json line, and inspect's election.
type leaderJSON struct {
	Name    string `json:"name"`
	Leading bool   `json:"leading"` // someone leads; false: nobody does, or (error) unseen
	Value   string `json:"value,omitempty"`
	Owner   string `json:"owner,omitempty"`
	Term    int64  `json:"term"`
	Since   string `json:"since,omitempty"`
	Error   string `json:"error,omitempty"` // why who leads cannot be seen now
	// Lease: the election is a client-go elector's, on kube's resource
	// lock; Value is then its holder identity.
	Lease *leaseJSON `json:"client_go_lease,omitempty"`
}

func leaderJSONOf(name string, o election.Observed) leaderJSON {
	l := o.Leader
	j := leaderJSON{Name: name, Leading: l.Owner != "" && o.Err == nil, Value: l.Value, Owner: l.Owner, Term: int64(l.Term), Since: sinceJSON(l)}
	if o.Err != nil {
		j.Error = o.Err.Error()
	}
	return j
}

func sinceJSON(l election.Leader) string {
	if l.Owner == "" || l.Since.IsZero() {
		return ""
	}
	return l.Since.UTC().Format(time.RFC3339Nano)
}
