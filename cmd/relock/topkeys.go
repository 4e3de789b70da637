package main

import (
	"fmt"
	"io"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// topView is what top's keys change: the pattern, the order, a pause,
// and a filter being typed.
type topView struct {
	pattern, sortBy string
	paused          bool
	typing          bool   // after "/": the keys typed are the next pattern
	typed           []byte // so far
}

// sortOrders are the orders "s" steps through.
var sortOrders = []string{"waiting", "ttl", "name"}

// press applies key k, and reports whether top must quit, and whether the
// pattern changed (the scan starts over).
func (v *topView) press(k byte) (quit, newPattern bool) {
	if v.typing {
		switch k {
		case '\r', '\n':
			v.typing = false
			if len(v.typed) > 0 {
				v.pattern = string(v.typed)
			} else {
				v.pattern = "*"
			}
			return false, true
		case 0x1b: // Esc: keep the pattern
			v.typing = false
		case 0x7f, 0x08: // backspace
			if len(v.typed) > 0 {
				v.typed = v.typed[:len(v.typed)-1]
			}
		default:
			if k >= ' ' {
				v.typed = append(v.typed, k)
			}
		}
		return false, false
	}
	switch k {
	case 'q', 0x03: // q, or ^C where the terminal does not signal it
		return true, false
	case 'p', ' ':
		v.paused = !v.paused
	case 's':
		v.sortBy = sortOrders[(slices.Index(sortOrders, v.sortBy)+1)%len(sortOrders)]
	case '/':
		v.typing, v.typed = true, nil
	}
	return false, false
}

// footer is the line under an interactive frame: the keys, or the filter
// being typed.
func (v *topView) footer(w io.Writer) {
	switch {
	case v.typing:
		fmt.Fprintf(w, "\nfilter (a SCAN pattern, Enter to apply, Esc to keep %q): %s_", v.pattern, v.typed)
	case v.paused:
		fmt.Fprintf(w, "\nPAUSED  p resume  s sort (%s)  / filter  q quit", v.sortBy)
	default:
		fmt.Fprintf(w, "\np pause  s sort (%s)  / filter  q quit", v.sortBy)
	}
}

// topKeys puts the terminal on stdin in cbreak mode (keys arrive as they
// are pressed, not echoed) and returns them; restore puts it back. keys is
// nil, and restore does nothing, when stdin is not a terminal.
func topKeys(stdin io.Reader) (keys <-chan byte, restore func()) {
	f, ok := stdin.(*os.File)
	if !ok {
		return nil, func() {}
	}
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, func() {}
	}
	raw := *old
	raw.Lflag &^= unix.ICANON | unix.ECHO
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	if unix.IoctlSetTermios(fd, unix.TCSETS, &raw) != nil {
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
	return ch, func() { unix.IoctlSetTermios(fd, unix.TCSETS, old) }
}
