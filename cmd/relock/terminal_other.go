//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package main

import "io"

// topKeys takes no keys where relock cannot put a terminal in cbreak mode:
// top refreshes until interrupted.
func topKeys(io.Reader) (keys <-chan byte, restore func()) { return nil, func() {} }
