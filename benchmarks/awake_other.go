//go:build !linux

package main

import "errors"

// keepAwake is Linux's only (awake.go): its spinners must die with the
// runner, which only Linux promises (Pdeathsig).
func keepAwake() (stop func(), err error) {
	return nil, errors.New("-awake: Linux only")
}
