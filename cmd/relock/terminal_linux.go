package main

import "golang.org/x/sys/unix"

// The ioctl requests that read and set a terminal's modes.
const getTermios, setTermios = unix.TCGETS, unix.TCSETS
