package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/scripts"
)

// leaseJSON is a client-go elector's record as kube.NewResourceLock keeps
// it in Redis (relock_lease:{name}): leader's and inspect's view of a
// controller elected by client-go on relock.
type leaseJSON struct {
	Holder        string `json:"holder,omitempty"` // "": released
	Term          int64  `json:"term"`
	RenewTime     string `json:"renew_time,omitempty"`
	LeaseDuration int    `json:"lease_duration_s"`
	// Live: a holder renewed it within its lease duration, by this
	// machine's clock, as client-go's electors judge it.
	Live bool `json:"live"`
}

// electorRecord is the part of client-go's LeaderElectionRecord (its JSON
// form) that leader and inspect show.
type electorRecord struct {
	HolderIdentity       string    `json:"holderIdentity"`
	LeaseDurationSeconds int       `json:"leaseDurationSeconds"`
	RenewTime            time.Time `json:"renewTime"`
}

// leaseOf returns the client-go lease record of name, or nil when there is
// none.
func leaseOf(ctx context.Context, locks *reentrant.Client, name string) (*leaseJSON, error) {
	got, found, err := scripts.LeaseRecordGet(ctx, scripts.Conn{Client: locks.Rueidis()}, name)
	switch {
	case err != nil && scripts.IsWrongType(err):
		return nil, fmt.Errorf("relock: lease record of %q: %w (%w)", name, reentrant.ErrWrongType, scripts.Tidy(err))
	case err != nil:
		return nil, fmt.Errorf("relock: lease record of %q: %w", name, err)
	case !found:
		return nil, nil
	}
	var rec electorRecord
	if err := json.Unmarshal([]byte(got.Record), &rec); err != nil {
		return nil, fmt.Errorf("relock: lease record of %q: %w: not a client-go election record: %v", name, reentrant.ErrWrongType, err)
	}
	return rec.lease(got.Term), nil
}

// lease is the record, with its term, as leader, inspect and top show it.
func (rec electorRecord) lease(term int64) *leaseJSON {
	l := &leaseJSON{Holder: rec.HolderIdentity, Term: term, LeaseDuration: rec.LeaseDurationSeconds}
	if !rec.RenewTime.IsZero() {
		l.RenewTime = rec.RenewTime.UTC().Format(time.RFC3339)
	}
	l.Live = l.Holder != "" && rec.left() > 0
	return l
}

// left is how long the lease has to run, by this machine's clock.
func (rec electorRecord) left() time.Duration {
	return time.Duration(rec.LeaseDurationSeconds)*time.Second - time.Since(rec.RenewTime)
}

// liveLease reads the hash at key as a client-go lease record
// (relock_lease:{name}, as kube's resource lock keeps it), for top: the
// lease's name, the lease, and the time it has left; ok is false for any
// other hash, and for a lease that is not held now.
func liveLease(key string, fields map[string]string) (name string, l *leaseJSON, left time.Duration, ok bool) {
	name, ok = strings.CutPrefix(key, "relock_lease:")
	var rec electorRecord
	if !ok || fields["record"] == "" || json.Unmarshal([]byte(fields["record"]), &rec) != nil {
		return "", nil, 0, false
	}
	term, _ := strconv.ParseInt(fields["term"], 10, 64)
	if l = rec.lease(term); !l.Live {
		return "", nil, 0, false
	}
	if inner, braced := strings.CutPrefix(name, "{"); braced && strings.HasSuffix(inner, "}") {
		name = strings.TrimSuffix(inner, "}")
	}
	return name, l, rec.left(), true
}

// write prints the lease for people, after "name: ".
func (l *leaseJSON) write(w io.Writer) {
	switch {
	case l.Live:
		fmt.Fprintf(w, "client-go lease: %s leads in term %d, renewed %s, lease %ds\n", l.Holder, l.Term, l.RenewTime, l.LeaseDuration)
	case l.Holder != "":
		fmt.Fprintf(w, "client-go lease: nobody leads: %s's lease of %ds ran out (renewed %s, term %d)\n", l.Holder, l.LeaseDuration, l.RenewTime, l.Term)
	default:
		fmt.Fprintf(w, "client-go lease: nobody leads (released; last term %d)\n", l.Term)
	}
}
