package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/reentrant"
)

func (e env) list(args []string) int {
	fs, conn := e.flags("list")
	asJSON := fs.Bool("json", false, "print JSON")
	rest, end := e.parse(fs, args, 0)
	if end != goOn {
		return int(end)
	}
	if len(rest) > 1 {
		return e.fail(exitUsage, "list takes at most one PATTERN")
	}
	pattern := "*"
	if len(rest) == 1 {
		pattern = rest[0]
	}
	locks, closeAll, err := conn.locks(e, reentrant.Options{Logger: e.log})
	if err != nil {
		return e.fail(exitFor(err), "%v", err)
	}
	defer closeAll()
	reports, err := lockReports(e.ctx, locks, pattern)
	if err != nil {
		return e.fail(exitFor(err), "%v", err)
	}
	if *asJSON {
		writeJSON(e.stdout, reports)
		return exitOK
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tTTL\tHOLDERS")
	for _, r := range reports {
		ttl := "none"
		if r.TTLMillis >= 0 {
			ttl = (time.Duration(r.TTLMillis) * time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Name, r.Kind, ttl, r.holdersLine())
	}
	tw.Flush()
	return exitOK
}

// lockReports reads the locks whose names match pattern: every hash found
// by SCAN that Inspect takes for a lock, with its election's leader.
func lockReports(ctx context.Context, locks *reentrant.Client, pattern string) ([]keyReport, error) {
	names, err := scanHashes(ctx, locks.Rueidis(), pattern)
	if err != nil {
		return nil, fmt.Errorf("scan: %w", err)
	}
	reports := []keyReport{}
	for _, name := range names {
		info, err := locks.Inspect(ctx, name)
		if err != nil {
			return nil, err
		}
		switch info.Kind {
		case reentrant.KindLock, reentrant.KindFair, reentrant.KindPriority, reentrant.KindFenced, reentrant.KindReadWrite, reentrant.KindGroup:
			r := report(info)
			if r.Election, err = leaderOf(ctx, locks, info); err != nil {
				return nil, err
			}
			reports = append(reports, r)
		}
	}
	return reports, nil
}

// holdersLine is list's HOLDERS column: each holder and its count (a group
// lock's held value by its hash), then the election's leader, if any.
func (r keyReport) holdersLine() string {
	var holders []string
	for _, h := range r.Holders {
		if h.Field != "" {
			holders = append(holders, fmt.Sprintf("#%s=%s×%d", h.Field, h.Owner, h.Count))
			continue
		}
		holders = append(holders, fmt.Sprintf("%s×%d", h.Owner, h.Count))
	}
	if l := r.Election; l != nil && l.Owner != "" {
		holders = append(holders, fmt.Sprintf("(election: %s leads in term %d)", l.Value, l.Term))
	}
	return strings.Join(holders, " ")
}

// scanHashes returns the hash keys matching pattern on every node, found
// with SCAN (never KEYS, which blocks the server), sorted.
func scanHashes(ctx context.Context, rdb rueidis.Client, pattern string) ([]string, error) {
	return scanKeys(ctx, rdb, pattern, "hash")
}

// scanKeys returns the keys of type typ matching pattern on every node,
// sorted, with SCAN, never KEYS.
func scanKeys(ctx context.Context, rdb rueidis.Client, pattern, typ string) ([]string, error) {
	seen := map[string]bool{}
	for _, node := range rdb.Nodes() {
		var cursor uint64
		for {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Type(typ).Build()).AsScanEntry()
			if err != nil {
				return nil, err
			}
			for _, k := range e.Elements {
				seen[k] = true
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	names := make([]string, 0, len(seen))
	for k := range seen {
		names = append(names, k)
	}
	sort.Strings(names)
	return names, nil
}
