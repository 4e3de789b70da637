package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
)

func main() {
	if end := guardMain(os.Args[1:]); end != goOn { // run's and elect's guard (guard_linux.go)
		os.Exit(int(end))
	}
	os.Exit(relock(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// relock runs the command args names and returns its exit code.
func relock(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := env{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr,
		log: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	conn, args, end := e.leadingConnFlags(args)
	if end != goOn {
		return int(end)
	}
	commands := map[string]func([]string) int{
		"run":          e.run,
		"hold":         e.hold,
		"inspect":      e.inspect,
		"list":         e.list,
		"force-unlock": e.forceUnlock,
		"deadlocks":    e.deadlocks,
		"elect":        e.elect,
		"top":          e.top,
		"events":       e.events,
		"leader":       e.leader,
		"version":      e.version,
	}
	cmd, ok := commands[args[0]]
	if !ok {
		if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
			fmt.Fprint(stdout, usage)
			return exitOK
		}
		fmt.Fprintf(stderr, "relock: unknown command %q (relock --help lists them)\n", args[0])
		return exitUsage
	}
	// The connection flags given before the command go to it, as if given
	// after: each command parses its flags before and after NAME alike.
	return cmd(append(conn, args[1:]...))
}

// leadingConnFlags splits off the connection flags given before the
// command (relock --url URL list), as git and kubectl users write them,
// and returns them and the rest, the command first. Only connection flags
// may come there: a lock flag belongs to run or hold.
func (e env) leadingConnFlags(args []string) (conn, rest []string, end exit) {
	if !strings.HasPrefix(args[0], "-") || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		return nil, args, goOn
	}
	fs := flag.NewFlagSet("relock", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	newConnFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, nil, exit(e.fail(exitUsage, "%v before the command; only connection flags may come there (relock --help)", err))
	}
	rest = fs.Args()
	if len(rest) == 0 {
		return nil, nil, exit(e.fail(exitUsage, "connection flags, but no command (relock --help)"))
	}
	return args[:len(args)-len(rest)], rest, goOn
}

const usage = `relock runs commands under Redisson-compatible Redis locks, and shows them.

usage:
  relock run [flags] NAME [--] CMD [ARGS...]   take lock NAME, run CMD, release
  relock hold [flags] NAME                     take lock NAME, hold it until signalled
  relock inspect [--json] [--value V] NAME     what is at NAME: kind, holders, TTL
  relock list [--json] [PATTERN]               the locks held now
  relock force-unlock [--yes] NAME             release NAME whoever holds it
  relock deadlocks [--json | --dot]            owners waiting for each other's locks
  relock top [--once] [--json] [PATTERN]      held locks, who waits, deadlocks, live
  relock events [--json] NAME                  who acquires, releases, lets NAME expire, live
  relock elect [flags] NAME [--] CMD [ARGS...] lead election NAME, run CMD while leading
  relock leader [--watch] [--json] NAME        who leads election NAME
  relock leader --candidates [--watch] NAME    who stands in election NAME
  relock leader --request-resign [--to OWNER] NAME
                                               ask NAME's leader to hand over
  relock version
  relock CMD --help                            CMD's flags

lock flags (run, hold): -n | -w/--wait DURATION, -E CODE, --lease D | --watchdog D,
  --fenced | --shared | --permits N | --value V..., --grace D (run),
  --progress-within D (run, elect: CMD reports with sd_notify's WATCHDOG=1), -v/--verbose
connection flags (every command, before or after it): --url, --addr, --db,
  --user, --tls, --tls-ca, --tls-cert, --tls-key, --tls-insecure,
  --connect-timeout, --sentinel-master, --redisson-config FILE;
  $REDIS_URL, $REDIS_ADDR, $REDIS_USERNAME, $REDIS_PASSWORD
flags may come before or after NAME; after NAME, run's first other word starts CMD.

exit status:
  0        done (run: CMD's own status, 128+n if signal n killed it)
  1        not held, not found, or not confirmed (leader: nobody leads); or the lock was held by
           someone else (-n, -w ran out; run and hold: -E CODE); deadlocks:
           a cycle was found
  2        bad usage: an unknown flag or command, an empty NAME, a flag's
           bad value (--db the server does not have, --permits 0)
  69       Redis could not be reached, or answered with an error
  75       the lock (elect: leadership) was lost while held; CMD was stopped
  77       Redis refused the credentials, or the user may not do what relock needs
  78       the server is not set up for it (events: keyspace notifications off,
           or CONFIG refused so they cannot be checked)
  124      CMD went --progress-within without reporting progress; it was stopped
  126, 127 CMD could not be run (not executable, not found)
  128+n    relock got signal n while waiting for the lock
`

func (e env) version(args []string) int {
	if len(args) > 0 {
		return e.fail(exitUsage, "version takes no arguments")
	}
	fmt.Fprintln(e.stdout, "relock", buildVersion())
	return exitOK
}

// buildVersion is the module version the binary was built at (go install
// ...@v1.2.3), or, for a build from a checkout, "(devel)" with the commit,
// its time, and "modified" when the tree had uncommitted changes.
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	v := cmp.Or(info.Main.Version, "(devel)")
	if v != "(devel)" {
		return v
	}
	vcs := map[string]string{}
	for _, s := range info.Settings {
		vcs[s.Key] = s.Value
	}
	if rev := vcs["vcs.revision"]; rev != "" {
		v += " " + rev[:min(12, len(rev))]
		if t := vcs["vcs.time"]; t != "" {
			v += " " + t
		}
		if vcs["vcs.modified"] == "true" {
			v += " modified"
		}
	}
	return v
}
