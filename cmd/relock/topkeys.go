package main

import (
	"fmt"
	"io"
	"slices"
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
