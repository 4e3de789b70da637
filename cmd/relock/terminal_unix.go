//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package main

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// topKeys puts the terminal on stdin in cbreak mode (keys arrive as they
// are pressed, not echoed) and returns them; restore puts it back. keys is
// nil, and restore does nothing, when stdin is not a terminal.
func topKeys(stdin io.Reader) (keys <-chan byte, restore func()) {
	f, ok := stdin.(*os.File)
	if !ok {
		return nil, func() {}
	}
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, getTermios)
	if err != nil {
		return nil, func() {}
	}
	raw := *old
	raw.Lflag &^= unix.ICANON | unix.ECHO
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	if unix.IoctlSetTermios(fd, setTermios, &raw) != nil {
		return nil, func() {}
	}
	ch := make(chan byte, 16)
	// The reader lives as long as the process: a read on a terminal
	// cannot be cut short, and top exits when it stops.
	go func() {
		b := make([]byte, 1)
		for {
			if n, err := f.Read(b); n == 0 || err != nil {
				close(ch)
				return
			}
			ch <- b[0]
		}
	}()
	return ch, func() { unix.IoctlSetTermios(fd, setTermios, old) }
}
