// Package runner holds what runs a client's lock scripts: its rueidis
// client, with the replica sync in use, which a server that refuses WAIT
// turns off for good.
package runner

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/scripts"
)

// Runner runs a client's lock scripts (Options.ReplicaSync, as plain
// values). The zero Runner is not ready: Start it.
type Runner struct {
	cur      atomic.Pointer[scripts.Conn]
	required bool
	log      *slog.Logger
	// unavailable is the error a refusal wraps when sync is required
	// (relock's ErrSyncUnavailable).
	unavailable error
}

// Start sets the runner. With replica sync asked for, it sends WAIT 0 0
// once (and ROLE, for ConnectedReplicas): a server that refuses it turns
// sync off with a warning, or fails with unavailable when sync is
// required. A server that cannot be reached now is tried as configured.
func (r *Runner) Start(rdb rueidis.Client, co *scripts.Coalescer, replicas int, timeout time.Duration, required bool, unavailable error, log *slog.Logger) error {
	r.required, r.unavailable, r.log = required, unavailable, log
	r.cur.Store(&scripts.Conn{Client: rdb, Replicas: replicas, Timeout: timeout, Seen: &scripts.ReplicaCounts{}, Coalesce: co})
	if replicas == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := scripts.ProbeWait(ctx, rdb, replicas == scripts.Connected); scripts.IsReply(err) {
		return r.Refused(err)
	}
	return nil
}

// Conn returns the connection for the next script.
func (r *Runner) Conn() scripts.Conn { return *r.cur.Load() }

// Syncing reports whether scripts wait for replicas.
func (r *Runner) Syncing() bool { return r.cur.Load().Replicas != 0 }

// Refused handles a server that refuses WAIT: an error wrapping
// unavailable when sync is required, else sync off from now on, with a
// warning.
func (r *Runner) Refused(err error) error {
	if r.required {
		return fmt.Errorf("relock: %w: %v", r.unavailable, err)
	}
	cur := r.cur.Load()
	if old := r.cur.Swap(&scripts.Conn{Client: cur.Client, Coalesce: cur.Coalesce}); old.Replicas != 0 {
		r.log.Warn("relock: the server refuses WAIT (or ROLE, which ConnectedReplicas needs); replica sync is off (set ReplicaSync.Required to fail instead)", "error", err)
	}
	return nil
}
