package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/signal"
	"syscall"
	"time"

	"github.com/relock-go/relock/reentrant/election"
)

// candidateJSON is one candidate of leader --candidates --json, which
// prints each list as one array on a line.
type candidateJSON struct {
	Name  string `json:"name"`
	Owner string `json:"owner"`
	Value string `json:"value"`
	Since string `json:"since"`
	Leads bool   `json:"leads"`
	TTLms int64  `json:"ttl_ms"` // what its registration has left
}

// candidates prints election NAME's live candidates, one a line; with
// watch, the list again at every change until signalled.
func (e env) candidates(el *election.Election, name string, watch, asJSON bool) int {
	show := func(cs []election.Candidate) {
		if asJSON {
			list := []candidateJSON{}
			for _, c := range cs {
				list = append(list, candidateJSON{Name: name, Owner: c.Owner, Value: c.Value, Since: c.Since.UTC().Format(time.RFC3339Nano), Leads: c.Leads, TTLms: c.TTL.Milliseconds()})
			}
			b, _ := json.Marshal(list)
			fmt.Fprintln(e.stdout, string(b))
			return
		}
		if len(cs) == 0 {
			fmt.Fprintf(e.stdout, "%s: no candidates\n", name)
		}
		for _, c := range cs {
			leads := ""
			if c.Leads {
				leads = " (leads)"
			}
			fmt.Fprintf(e.stdout, "%s: %s%s, owner %s, since %s\n", name, c.Value, leads, c.Owner, c.Since.UTC().Format(time.RFC3339Nano))
		}
	}
	if !watch {
		cs, err := el.Candidates(e.ctx)
		if err != nil {
			return e.fail(exitFor(err), "%v", err)
		}
		show(cs)
		return exitOK
	}
	ctx, stop := signal.NotifyContext(e.ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var last error
	for o := range el.ObserveCandidates(ctx) {
		if o.Err != nil {
			e.fail(0, "%s: cannot see the candidates: %v", name, o.Err)
		} else {
			show(o.Candidates)
		}
		last = o.Err
	}
	if ctx.Err() == nil && last != nil {
		return exitFor(last)
	}
	return exitOK
}

// requestResign asks election NAME's leader to resign, handing over to
// the candidate whose owner is to ("" for the one standing longest).
// Exit 1 when nobody leads or to does not stand.
func (e env) requestResign(el *election.Election, name, to string, asJSON bool) int {
	var opts []election.ResignOption
	if to != "" {
		opts = append(opts, election.To(to))
	}
	l, err := el.RequestResign(e.ctx, opts...)
	switch {
	case errors.Is(err, election.ErrNoLeader), errors.Is(err, election.ErrNotCandidate):
		e.fail(0, "%v", err)
		return exitNotFound
	case err != nil:
		return e.fail(exitFor(err), "%v", err)
	}
	if asJSON {
		b, _ := json.Marshal(struct {
			Name  string `json:"name"`
			Owner string `json:"asked"`
			Term  int64  `json:"term"`
			To    string `json:"to,omitempty"`
		}{name, l.Owner, int64(l.Term), to})
		fmt.Fprintln(e.stdout, string(b))
		return exitOK
	}
	successor := "the candidate standing longest"
	if to != "" {
		successor = to
	}
	fmt.Fprintf(e.stdout, "%s: asked %s (term %d) to resign to %s\n", name, l.Owner, l.Term, successor)
	return exitOK
}
