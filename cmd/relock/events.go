package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/events"
)

// events prints what happens to NAME (reentrant/events) until
// interrupted: a line per event, or with --json an object per line.
func (e env) events(args []string) int {
	fs, conn := e.flags("events")
	asJSON := fs.Bool("json", false, "print JSON: kind, key, holders, count, at, error (one object per line)")
	enable := fs.Bool("enable-notifications", false, "add the keyspace notification flags the watch needs on the key's node (CONFIG SET), when missing")
	unchecked := fs.Bool("unchecked", false, "do not check notify-keyspace-events (a server that refuses CONFIG)")
	rest, end := e.parse(fs, args, 0)
	if end != goOn {
		return int(end)
	}
	if len(rest) != 1 {
		return e.fail(exitUsage, "events needs NAME")
	}
	locks, closeAll, err := conn.locks(e, reentrant.Options{})
	if err != nil {
		return e.fail(exitFor(err), "%v", err)
	}
	defer closeAll()
	ctx, stop := signal.NotifyContext(e.ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	evs, err := events.Watch(ctx, locks, rest[0], events.Options{EnableNotifications: *enable, Unchecked: *unchecked})
	switch {
	case errors.Is(err, reentrant.ErrNoPermission):
		return e.fail(exitNoPerm, "%v", err)
	case errors.Is(err, events.ErrNotificationsOff):
		return e.fail(exitConfig, "%v; or run relock events --enable-notifications", err)
	case errors.Is(err, events.ErrNotificationsUnknown):
		return e.fail(exitConfig, "%v; run relock events --unchecked if they are known to be on", err)
	}
	if err != nil {
		return e.fail(exitFor(err), "%v", err)
	}
	fmt.Fprintf(e.stderr, "relock: watching %q until interrupted\n", rest[0])
	for ev := range evs {
		if *asJSON {
			b, _ := json.Marshal(eventJSONOf(ev))
			fmt.Fprintln(e.stdout, string(b))
			continue
		}
		fmt.Fprintln(e.stdout, eventLine(ev))
	}
	return exitOK
}

// eventLine is one event as text: time, key, kind, and who or what.
func eventLine(ev events.Event) string {
	var who []string
	for _, h := range ev.Holders {
		w := h.Owner
		if h.Value != "" {
			w = h.Value + "=" + w
		}
		if h.Write {
			w += " (write)"
		}
		who = append(who, w)
	}
	line := fmt.Sprintf("%s %s %s", ev.At.UTC().Format("15:04:05.000"), ev.Key, ev.Kind)
	switch {
	case len(who) > 0:
		line += " " + strings.Join(who, ", ")
	case ev.Kind == events.Changed:
		line += fmt.Sprintf(" count %d", ev.Count)
	case ev.Err != nil:
		line += ": " + ev.Err.Error()
	}
	return line
}

// eventJSON is events' --json line.
type eventJSON struct {
	Kind    string       `json:"kind"`
	Key     string       `json:"key"`
	Holders []holderJSON `json:"holders,omitempty"`
	Count   int64        `json:"count,omitempty"`
	At      string       `json:"at"`
	Error   string       `json:"error,omitempty"`
}

type holderJSON struct {
	Owner string `json:"owner"`
	Value string `json:"value,omitempty"`
	Write bool   `json:"write,omitempty"`
}

func eventJSONOf(ev events.Event) eventJSON {
	out := eventJSON{Kind: string(ev.Kind), Key: ev.Key, Count: ev.Count, At: ev.At.UTC().Format(time.RFC3339Nano)}
	for _, h := range ev.Holders {
		out.Holders = append(out.Holders, holderJSON{Owner: h.Owner, Value: h.Value, Write: h.Write})
	}
	if ev.Err != nil {
		out.Error = ev.Err.Error()
	}
	return out
}
