package main

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// The exit statuses of a CMD that did not run to its end, as a shell
// reports them: not runnable, not found, ended by signal n (128+n).
const (
	exitCannotExec  = 126
	exitNoSuchCmd   = 127
	exitSignalsBase = 128
)

// command is CMD as run and elect start it: on Linux behind a guard
// process of relock's own (guard_linux.go), which ends CMD and every
// process it started the moment relock dies, even by SIGKILL; elsewhere
// started directly.
type command interface {
	// signal forwards sig to CMD.
	signal(sig os.Signal)
	// kill ends CMD, and on Linux every process it started, with SIGKILL.
	kill()
	// wait waits for CMD and returns its exit status as a shell reports
	// it (128+n for a signal n).
	wait() int
}

// direct is CMD started as relock's own child, with nothing to end it if
// relock dies.
type direct struct{ cmd *exec.Cmd }

func (d direct) signal(sig os.Signal) { _ = d.cmd.Process.Signal(sig) }
func (d direct) kill()                { _ = d.cmd.Process.Kill() }
func (d direct) wait() int {
	_ = d.cmd.Wait()
	return exitStatus(d.cmd.ProcessState)
}

// startError is the exit code and message for a CMD that could not be
// started: 127 when it is not found, 126 when it cannot be run.
func startError(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		return exitNoSuchCmd
	}
	return exitCannotExec
}

// exitStatus is CMD's exit status as a shell reports it.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitSignalsBase + int(ws.Signal())
	}
	return ps.ExitCode()
}
