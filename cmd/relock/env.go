package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/relock-go/relock/reentrant"
)

// Exit codes shared by the commands (doc.go lists them all; a CMD that did
// not run to its end has its own, in guard.go).
const (
	exitOK          = 0
	exitNotFound    = 1
	exitUsage       = 2
	exitUnavailable = 69 // sysexits EX_UNAVAILABLE
	exitLost        = 75 // sysexits EX_TEMPFAIL: the lock or leadership was lost while held
	// exitNoPerm is sysexits EX_NOPERM: Redis refused the credentials, or
	// the ACL user may not do what relock needs.
	exitNoPerm = 77
	exitConfig = 78 // sysexits EX_CONFIG: the server is not set up for it
)

// env is what a command reads and writes besides its arguments.
type env struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	log    *slog.Logger
}

// parse parses args into fs, flags before or after the positional
// arguments, and returns the positional ones. After the leading
// positionals (0: no limit), or after "--", the rest is returned as it
// is, "--" first if it was there: a command's own arguments. code is the
// exit code when ok is false: 0 for --help (its flags printed on stdout),
// 2 for bad usage (why, on stderr), an empty NAME or PATTERN included.
func (e env) parse(fs *flag.FlagSet, args []string, leading int) (pos []string, end exit) {
	for {
		if err := fs.Parse(args); err != nil {
			printed := fs.Output().(*strings.Builder).String()
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(e.stdout, printed)
				return nil, exit(exitOK)
			}
			fmt.Fprint(e.stderr, printed)
			return nil, exit(exitUsage)
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(append(pos, "--"), rest...), goOn
		}
		if len(rest) == 0 {
			return pos, goOn
		}
		if leading > 0 && len(pos) == leading {
			return append(pos, rest...), goOn
		}
		if rest[0] == "" {
			return nil, exit(e.fail(exitUsage, "%s: an empty argument where NAME or PATTERN belongs", strings.TrimPrefix(fs.Name(), "relock ")))
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// exit is how parsing a command's arguments ended: the command goes on
// (goOn), or exits now with this code (a usage error, or --help).
type exit int

// goOn says the arguments were good: the command runs.
const goOn exit = -1

// fail prints a one-line reason and returns code.
func (e env) fail(code int, format string, args ...any) int {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintln(e.stderr, "relock: "+strings.TrimPrefix(msg, "relock: "))
	return code
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
