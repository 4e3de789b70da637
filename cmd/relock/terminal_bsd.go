//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package main

import "golang.org/x/sys/unix"

// The ioctl requests that read and set a terminal's modes.
const getTermios, setTermios = unix.TIOCGETA, unix.TIOCSETA
