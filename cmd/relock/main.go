package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"

	"github.com/relock-go/relock/reentrant"
)

// Exit codes shared by the commands; run adds its own (see doc.go).
const (
	exitOK          = 0
	exitNotFound    = 1
	exitUsage       = 2
	exitUnavailable = 69 // sysexits EX_UNAVAILABLE
)

func main() {
	os.Exit(relock(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// env is what a command reads and writes besides its arguments.
type env struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	log    *slog.Logger
}

// relock runs the command args names and returns its exit code.
func relock(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := env{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr,
		log: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	commands := map[string]func([]string) int{
		"run":          e.run,
		"inspect":      e.inspect,
		"list":         e.list,
		"force-unlock": e.forceUnlock,
		"version":      e.version,
	}
	cmd, ok := commands[args[0]]
	if !ok {
		if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
			fmt.Fprint(stdout, usage)
			return exitOK
		}
		fmt.Fprintf(stderr, "relock: unknown command %q\n%s", args[0], usage)
		return exitUsage
	}
	return cmd(args[1:])
}

const usage = `usage:
  relock run [-n | -w DURATION] [-E CODE] [--lease D | --watchdog D] [--fenced] [--grace D] NAME -- CMD [ARGS...]
  relock inspect [--json] NAME
  relock list [--json] [PATTERN]
  relock force-unlock [--yes] NAME
  relock version
connection flags (every command): --url, --addr, --db, --user, --tls, --tls-ca, --tls-cert,
  --tls-key, --tls-insecure, --connect-timeout, --sentinel-master;
  $REDIS_URL, $REDIS_ADDR, $REDIS_USERNAME, $REDIS_PASSWORD
`

// flags returns a flag set for command name that prints its errors to
// stderr, and the connection flags registered on it.
func (e env) flags(name string) (*flag.FlagSet, *connFlags) {
	fs := flag.NewFlagSet("relock "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	return fs, newConnFlags(fs)
}

// parse parses args into fs and returns the arguments left, or false after
// printing why they are wrong.
func (e env) parse(fs *flag.FlagSet, args []string) ([]string, bool) {
	if err := fs.Parse(args); err != nil {
		return nil, false // flag printed it
	}
	return fs.Args(), true
}

// fail prints a one-line reason and returns code.
func (e env) fail(code int, format string, args ...any) int {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintln(e.stderr, "relock: "+strings.TrimPrefix(msg, "relock: "))
	return code
}

func (e env) version(args []string) int {
	if len(args) > 0 {
		return e.fail(exitUsage, "version takes no arguments")
	}
	v := "(devel)"
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		v = info.Main.Version
	}
	fmt.Fprintln(e.stdout, "relock", v)
	return exitOK
}

// errExit carries an exit code with an error.
type errExit struct {
	code int
	err  error
}

func (e errExit) Error() string { return e.err.Error() }

// exitFor returns err's exit code: its own, 77 for an ACL refusal, or 69
// (Redis unavailable, or an error reply).
func exitFor(err error) int {
	var x errExit
	switch {
	case errors.As(err, &x):
		return x.code
	case errors.Is(err, reentrant.ErrNoPermission), strings.Contains(err.Error(), "NOPERM"):
		return exitNoPerm
	}
	return exitUnavailable
}
