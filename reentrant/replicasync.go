package reentrant

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/relock-go/relock/scripts"
)

// scriptRunner runs a client's lock scripts: its rueidis client, with the
// replica sync in use (Options.ReplicaSync, as plain values, so that this
// file depends on no option), which a server that refuses WAIT turns off
// for good. The zero scriptRunner is not ready: start it.
type scriptRunner struct {
	cur      atomic.Pointer[scripts.Conn]
	required bool
	log      *slog.Logger
}

// start sets the runner. With replica sync asked for, it sends WAIT 0 0
// once (and ROLE, for ConnectedReplicas): a server that refuses it turns
// sync off with a warning, or fails New with ErrSyncUnavailable when sync
// is required. A server that cannot be reached now is tried as configured.
func (r *scriptRunner) start(rdb rueidis.Client, co *scripts.Coalescer, replicas int, timeout time.Duration, required bool, log *slog.Logger) error {
	r.required, r.log = required, log
	r.cur.Store(&scripts.Conn{Client: rdb, Replicas: replicas, Timeout: timeout, Seen: &scripts.ReplicaCounts{}, Coalesce: co})
	if replicas == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := scripts.ProbeWait(ctx, rdb, replicas == scripts.Connected); scripts.IsReply(err) {
		return r.refused(err)
	}
	return nil
}

// conn returns the runner for the next script.
func (r *scriptRunner) conn() scripts.Conn { return *r.cur.Load() }

// syncing reports whether scripts wait for replicas.
func (r *scriptRunner) syncing() bool { return r.cur.Load().Replicas != 0 }

// refused handles a server that refuses WAIT: an error when sync is
// required, else sync off from now on, with a warning.
func (r *scriptRunner) refused(err error) error {
	if r.required {
		return fmt.Errorf("relock: %w: %v", ErrSyncUnavailable, err)
	}
	cur := r.cur.Load()
	if old := r.cur.Swap(&scripts.Conn{Client: cur.Client, Coalesce: cur.Coalesce}); old.Replicas != 0 {
		r.log.Warn("relock: the server refuses WAIT (or ROLE, which ConnectedReplicas needs); replica sync is off (set ReplicaSync.Required to fail instead)", "error", err)
	}
	return nil
}
