// Package callback runs a user's function on one of relock's own
// goroutines (the watchdog's loop, a timer, a background task), where no
// recover of the user's can reach a panic. A panic there would end the
// process, and with it every hold and leadership it has, with no Unlock and
// no Resign: so it is recovered, logged with its stack, and returned as an
// error that the caller counts as the callback's failure.
package callback

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
)

// ErrPanicked is wrapped by the error Guard.Run returns for a callback
// that panicked.
var ErrPanicked = errors.New("a callback panicked")

// Guard runs callbacks for one Client. Its zero value logs to
// slog.Default.
type Guard struct {
	Logger *slog.Logger
	logged sync.Map // callback name -> struct{}: its stack was logged
}

// Run calls fn, named name in what it logs, and returns nil, or, when fn
// panics, an error wrapping ErrPanicked with the panic's value. The first
// panic of each name is logged at Error with its stack, later ones at
// Debug: a hook that panics on every renewal round fills no disk.
func (g *Guard) Run(name string, fn func()) (err error) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		err = fmt.Errorf("relock: %s: %w: %v", name, ErrPanicked, v)
		log := g.Logger
		if log == nil {
			log = slog.Default()
		}
		if _, again := g.logged.LoadOrStore(name, struct{}{}); again {
			log.Debug("relock: a callback panicked again; recovered", "callback", name, "panic", fmt.Sprint(v))
			return
		}
		log.Error("relock: a callback panicked; recovered, and counted as its failure", "callback", name,
			"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	}()
	fn()
	return nil
}
