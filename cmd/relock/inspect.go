package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/election"
	"github.com/relock-go/relock/scripts"
)

// keyReport is inspect's and list's JSON form of a key.
type keyReport struct {
	Name      string  `json:"name"`
	Kind      string  `json:"kind"`
	RedisType string  `json:"redis_type"`
	TTLMillis int64   `json:"ttl_ms"` // -1: no expiry; 0: no key
	Mode      string  `json:"mode,omitempty"`
	Holders   []entry `json:"holders,omitempty"`
	Queue     []entry `json:"queue,omitempty"`
	Token     int64   `json:"fencing_token,omitempty"`
	Count     *int64  `json:"count,omitempty"`
	Rate      *rate   `json:"rate,omitempty"`
	// An election whose lock this is (see leaderOf): who leads it.
	Election *leaderJSON `json:"election,omitempty"`
	// A client-go elector's lease record of the same name (kube's
	// resource lock).
	Lease *leaseJSON `json:"client_go_lease,omitempty"`
}

type entry struct {
	// A group lock's held value: Field is its hash, as stored (see
	// scripts.GroupField); Value is the value itself, when inspect
	// --value named it. A free value named has no owner.
	Field    string     `json:"field,omitempty"`
	Value    string     `json:"value,omitempty"`
	Owner    string     `json:"owner,omitempty"`
	Count    int64      `json:"count,omitempty"`
	Write    bool       `json:"write,omitempty"`
	Deadline *time.Time `json:"deadline,omitempty"`
	// A priority lock's waiter: its priority and arrival.
	Priority *int       `json:"priority,omitempty"`
	Since    *time.Time `json:"since,omitempty"`
}

type rate struct {
	Permits        int64 `json:"permits"`
	IntervalMillis int64 `json:"interval_ms"`
	PerClient      bool  `json:"per_client"`
}

func report(k reentrant.KeyInfo) keyReport {
	r := keyReport{Name: k.Name, Kind: string(k.Kind), RedisType: k.RedisType, TTLMillis: k.TTL.Milliseconds(), Mode: k.Mode, Token: k.Token}
	if k.TTL == reentrant.NoExpiry {
		r.TTLMillis = -1
	}
	if r.Kind == "" {
		r.Kind = "none"
	}
	r.Holders, r.Queue = entries(k.Holders), entries(k.Queue)
	switch k.Kind {
	case reentrant.KindSemaphore, reentrant.KindPermitSemaphore, reentrant.KindLatch, reentrant.KindSemaphoreOrLatch, reentrant.KindRate:
		r.Count = &k.Count
	}
	if k.Kind == reentrant.KindRate {
		r.Rate = &rate{Permits: k.Rate.Permits, IntervalMillis: k.Rate.Interval.Milliseconds(), PerClient: k.Rate.PerClient}
	}
	return r
}

func entries(hs []reentrant.Holder) []entry {
	var es []entry
	for _, h := range hs {
		e := entry{Field: h.Value, Owner: h.Owner, Count: h.Count, Write: h.Write}
		if !h.Deadline.IsZero() {
			d := h.Deadline.UTC()
			e.Deadline = &d
		}
		if !h.Since.IsZero() {
			p, since := h.Priority, h.Since.UTC()
			e.Priority, e.Since = &p, &since
		}
		es = append(es, e)
	}
	return es
}

func (e env) inspect(args []string) int {
	fs, conn := e.flags("inspect")
	asJSON := fs.Bool("json", false, "print JSON")
	var values valueList
	fs.Var(&values, "value", "of group lock NAME, show only value `V`'s holder (or that it is free); repeat for more. A value is stored as its hash")
	rest, end := e.parse(fs, args, 0)
	if end != goOn {
		return int(end)
	}
	if len(rest) != 1 {
		return e.fail(exitUsage, "inspect needs one NAME")
	}
	locks, closeLocks, err := conn.locks(e, reentrant.Options{})
	if err != nil {
		return e.fail(exitFor(err), "%v", err)
	}
	defer closeLocks()
	info, err := locks.Inspect(e.ctx, rest[0])
	if err != nil {
		return e.fail(exitFor(err), "%v", err)
	}
	r := report(info)
	if r.Election, err = leaderOf(e.ctx, locks, info); err != nil {
		return e.fail(exitFor(err), "%v", err)
	}
	if r.Lease, err = leaseOf(e.ctx, locks, rest[0]); err != nil {
		return e.fail(exitFor(err), "%v", err)
	}
	if len(values) > 0 {
		r.Holders = namedValues(r.Holders, values)
	}
	if *asJSON {
		writeJSON(e.stdout, r)
	} else {
		r.write(e.stdout)
	}
	if info.Kind == "" && r.Lease == nil {
		return exitNotFound
	}
	return exitOK
}

// leaderOf returns who leads the election whose lock is the fenced lock
// info describes, or nil when it is no election's (no leader was ever
// recorded for it).
func leaderOf(ctx context.Context, locks *reentrant.Client, info reentrant.KeyInfo) (*leaderJSON, error) {
	if info.Kind != reentrant.KindFenced {
		return nil, nil
	}
	l, err := election.New(locks, info.Name, election.Options{}).Leader(ctx)
	switch {
	case errors.Is(err, election.ErrNoLeader) && l.Term == 0:
		return nil, nil
	case err != nil && !errors.Is(err, election.ErrNoLeader):
		return nil, err
	}
	j := leaderJSONOf(info.Name, election.Observed{Leader: l})
	return &j, nil
}

// namedValues returns a group lock's holders of values, in their order:
// each value's holder, found by its hash, or the value alone when free.
func namedValues(holders []entry, values []string) []entry {
	var named []entry
	for _, v := range values {
		field := scripts.GroupField(v)
		i := slices.IndexFunc(holders, func(h entry) bool { return h.Field == field })
		h := entry{Field: field}
		if i >= 0 {
			h = holders[i]
		}
		h.Value = v
		named = append(named, h)
	}
	return named
}

// writeJSONLine writes v as one line of JSON.
func writeJSONLine(w io.Writer, v any) { _ = json.NewEncoder(w).Encode(v) }

func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// write prints the report for people.
func (r keyReport) write(w io.Writer) {
	r.writeHeading(w)
	if r.Count != nil {
		fmt.Fprintf(w, "  count: %d\n", *r.Count)
	}
	if r.Rate != nil {
		fmt.Fprintf(w, "  rate: %d per %v, per client: %v\n", r.Rate.Permits, time.Duration(r.Rate.IntervalMillis)*time.Millisecond, r.Rate.PerClient)
	}
	if r.Token > 0 {
		fmt.Fprintf(w, "  fencing token: %d\n", r.Token)
	}
	if l := r.Election; l != nil && l.Owner != "" {
		fmt.Fprintf(w, "  election: %s leads in term %d since %s\n", l.Value, l.Term, l.Since)
	} else if l != nil {
		fmt.Fprintf(w, "  election: nobody leads (last term %d)\n", l.Term)
	}
	if r.Lease != nil {
		fmt.Fprint(w, "  ")
		r.Lease.write(w)
	}
	for _, h := range r.Holders {
		fmt.Fprintf(w, "  %s\n", h.holding())
	}
	for i, q := range r.Queue {
		fmt.Fprintf(w, "  queue %d: %s%s\n", i+1, q.Owner, q.detail())
	}
}

// writeHeading writes the report's first line: name, kind, mode, and
// whether it is free or how long it lives.
func (r keyReport) writeHeading(w io.Writer) {
	fmt.Fprintf(w, "%s: %s", r.Name, r.Kind)
	if r.Mode != "" {
		fmt.Fprintf(w, " (%s)", r.Mode)
	}
	switch {
	case r.RedisType == "none" && r.Kind != "none":
		fmt.Fprint(w, ", free")
	case r.Kind == "none":
	case r.TTLMillis < 0:
		fmt.Fprint(w, ", no expiry")
	default:
		fmt.Fprintf(w, ", ttl %v", time.Duration(r.TTLMillis)*time.Millisecond)
	}
	fmt.Fprintln(w)
}

// holding is a holder's line: a group lock's value, free or held, or a
// holder with its details.
func (en entry) holding() string {
	switch {
	case en.Value != "" && en.Owner == "":
		return fmt.Sprintf("value %q: free", en.Value)
	case en.Value != "":
		return fmt.Sprintf("value %q: holder %s%s", en.Value, en.Owner, en.detail())
	case en.Field != "":
		return fmt.Sprintf("value hash %s: holder %s%s", en.Field, en.Owner, en.detail())
	}
	return fmt.Sprintf("holder %s%s", en.Owner, en.detail())
}

func (en entry) detail() string {
	var parts []string
	if en.Count > 0 {
		parts = append(parts, fmt.Sprintf("count %d", en.Count))
	}
	if en.Write {
		parts = append(parts, "writer")
	}
	if en.Priority != nil {
		parts = append(parts, fmt.Sprintf("priority %d, waiting %v", *en.Priority, time.Since(*en.Since).Round(time.Millisecond)))
	}
	if en.Deadline != nil {
		parts = append(parts, "until "+en.Deadline.Format(time.RFC3339Nano))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
