package main

import (
	"bufio"
	"fmt"
	"strings"

	"github.com/relock-go/relock/reentrant"
)

func (e env) forceUnlock(args []string) int {
	fs, conn := e.flags("force-unlock")
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	rest, end := e.parse(fs, args, 0)
	if end != goOn {
		return int(end)
	}
	if len(rest) != 1 {
		return e.fail(exitUsage, "force-unlock needs one NAME")
	}
	name := rest[0]
	locks, closeLocks, err := conn.locks(e, reentrant.Options{})
	if err != nil {
		return e.fail(exitFor(err), "%v", err)
	}
	defer closeLocks()
	info, err := locks.Inspect(e.ctx, name)
	if err != nil {
		return e.fail(exitFor(err), "%v", err)
	}
	var mu *reentrant.Lock
	switch info.Kind {
	case reentrant.KindLock, reentrant.KindFenced, reentrant.KindGroup:
		// A group lock's hash goes whole, every value with it; the "0"
		// on Redisson's channel wakes its waiters, relock's and Java's.
		mu = locks.Lock(name)
	case reentrant.KindFair:
		mu = locks.FairLock(name)
	case reentrant.KindPriority:
		mu = locks.PriorityLock(name)
	case reentrant.KindReadWrite:
		mu = locks.ReadWriteLock(name).WriteLock()
	case "":
		return e.fail(exitNotFound, "%s is not held", name)
	default:
		return e.fail(exitNotFound, "%s is not a lock but %s (a Redis %s): left alone", name, withArticle(string(info.Kind)), info.RedisType)
	}
	if !*yes && !e.confirm(report(info)) {
		return e.fail(exitNotFound, "not confirmed; %s left alone", name)
	}
	deleted, err := mu.ForceUnlock(e.ctx)
	if err != nil {
		return e.fail(exitFor(err), "%v", err)
	}
	if !deleted {
		return e.fail(exitNotFound, "%s was not held", name)
	}
	fmt.Fprintf(e.stdout, "%s: unlocked; waiters told\n", name)
	return exitOK
}

// confirm shows the lock and asks for a "y" on stdin.
func (e env) confirm(r keyReport) bool {
	r.write(e.stderr)
	fmt.Fprintf(e.stderr, "force-unlock %s, whoever holds it? [y/N] ", r.Name)
	line, _ := bufio.NewReader(e.stdin).ReadString('\n')
	answer := strings.ToLower(strings.TrimSpace(line))
	return answer == "y" || answer == "yes"
}

// withArticle names a key kind in a sentence: "a semaphore", "an other"
// would not read.
func withArticle(kind string) string {
	switch {
	case kind == "other":
		return "some other value"
	case strings.IndexByte("aeiou", kind[0]) >= 0:
		return "an " + kind
	}
	return "a " + kind
}
