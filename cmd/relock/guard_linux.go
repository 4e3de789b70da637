//go:build linux

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// On Linux, run and elect start CMD behind a guard: relock itself, run
// again as "relock <guardArg> CLEANUP PATH ARGV...", between relock and CMD. The
// guard is a child subreaper (PR_SET_CHILD_SUBREAPER), so what CMD starts
// and leaves behind becomes the guard's child rather than init's; and it
// holds the read end of a pipe whose write end only relock holds. When
// relock dies, by SIGKILL too, the kernel closes that end, the guard reads
// EOF, and it SIGKILLs CMD and every process below it, then exits: CMD
// dies with relock, within milliseconds, long before the lock can pass on
// (the hold's TTL is a watchdog timeout). That is flock(1)'s promise: the
// lock lives as long as the command, and no longer. CLEANUP, unless "",
// is a directory of relock's (its notify socket's) that the guard removes
// then, since relock cannot.
//
// relock sends the guard SIGINT and SIGTERM to forward to CMD, and
// SIGUSR1 to SIGKILL CMD and everything below it (the end of --grace).
// The guard exits with CMD's status as a shell reports it, or 126 and 127
// with a line on stderr when CMD cannot be started.

const guardArg = "__relock-guard"

// guardKill is the signal that asks the guard to kill CMD's whole tree.
const guardKill = syscall.SIGUSR1

// startCommand starts cmd behind a guard, which removes the directory
// cleanup (unless "") if relock dies. Without the path of relock's own
// executable (an unusual system) it starts cmd directly.
func startCommand(cmd *exec.Cmd, cleanup string) (command, error) {
	if cmd.Err != nil {
		return nil, cmd.Err
	}
	self, err := os.Executable()
	if err != nil {
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		return direct{cmd}, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	g := exec.Command(self, append([]string{guardArg, cleanup, cmd.Path}, cmd.Args...)...)
	g.Stdin, g.Stdout, g.Stderr, g.Env = cmd.Stdin, cmd.Stdout, cmd.Stderr, cmd.Env
	g.ExtraFiles = []*os.File{r} // fd 3 in the guard
	err = g.Start()
	r.Close()
	if err != nil {
		w.Close()
		return nil, err
	}
	return &guarded{g: g, alive: w}, nil
}

// guarded is CMD behind its guard g; alive is the pipe's write end, open
// for as long as relock lives.
type guarded struct {
	g     *exec.Cmd
	alive *os.File
}

func (c *guarded) signal(sig os.Signal) { _ = c.g.Process.Signal(sig) }
func (c *guarded) kill()                { _ = c.g.Process.Signal(guardKill) }
func (c *guarded) wait() int {
	_ = c.g.Wait()
	c.alive.Close()
	return exitStatus(c.g.ProcessState)
}

// guardMain runs the guard when relock was started as one, and returns
// its exit code; goOn when relock was not.
func guardMain(args []string) exit {
	if len(args) < 4 || args[0] != guardArg {
		return goOn
	}
	return exit(guard(args[1], args[2], args[3:]))
}

const prSetChildSubreaper = 36

// guard runs PATH with argv as CMD, and ends it and everything below it
// when relock (fd 3) dies or asks; when relock dies it removes cleanup
// too.
func guard(cleanup, path string, argv []string) int {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		fmt.Fprintf(os.Stderr, "relock: the command's guard cannot be a subreaper (%v); a background process of it may outlive relock\n", errno)
	}
	relock := os.NewFile(3, "relock")
	syscall.CloseOnExec(3)
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, guardKill)
	cmd := &exec.Cmd{Path: path, Args: argv, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "relock: %v\n", err)
		return startError(err)
	}
	gone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, relock) // EOF: relock died
		close(gone)
	}()
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	for {
		select {
		case sig := <-sigs:
			if sig == guardKill {
				killTree()
				continue
			}
			_ = cmd.Process.Signal(sig)
		case <-gone:
			killTree()
			if cleanup != "" {
				_ = os.RemoveAll(cleanup)
			}
			return exitLost
		case <-done:
			if cmd.ProcessState == nil { // reaped by killTree
				return exitSignalsBase + int(syscall.SIGKILL)
			}
			return exitStatus(cmd.ProcessState)
		}
	}
}

// killTree SIGKILLs every live process below the guard and reaps its
// children, until none is left: killing a parent makes its children the
// guard's (it is their subreaper), which the next round finds.
func killTree() {
	for range 1000 {
		pids := below(os.Getpid())
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
		if len(pids) == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// below returns the live (not zombie) processes below pid, read from
// /proc.
func below(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	live := map[int]bool{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := bytes.Fields(stat[i+1:])
		if len(fields) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(string(fields[1]))
		children[ppid] = append(children[ppid], p)
		live[p] = string(fields[0]) != "Z"
	}
	var out []int
	for queue := children[pid]; len(queue) > 0; queue = queue[1:] {
		p := queue[0]
		if live[p] {
			out = append(out, p)
		}
		queue = append(queue, children[p]...)
	}
	return out
}
