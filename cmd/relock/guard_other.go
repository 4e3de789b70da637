//go:build !linux

package main

import "os/exec"

// startCommand starts cmd directly: without Linux's child subreaper, a
// relock killed by SIGKILL leaves CMD running (docs/operations.md), and
// cleanup behind.
func startCommand(cmd *exec.Cmd, _ string) (command, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return direct{cmd}, nil
}

// guardMain is not used off Linux.
func guardMain([]string) exit { return goOn }
