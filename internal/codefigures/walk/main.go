// Command walk runs one uncontended Lock and its Unlock of one kind on a
// Redis server, and writes the coverage counters of that pair alone: it is
// built with -cover -covermode=atomic by codefigures' TestLockWalk, which
// reads the counters to list the code the pair entered. A Lock and Unlock
// come first, so that loading the scripts is not counted.
//
//	walk -addr 127.0.0.1:7000 -kind lock -dir /tmp/counters
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/coverage"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/reentrant"
)

func main() {
	addr := flag.String("addr", "", "the Redis server")
	kind := flag.String("kind", "lock", "lock, fair, priority, group, spin or write")
	dir := flag.String("dir", "", "where the counters are written")
	flag.Parse()
	if err := walk(*addr, *kind, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "walk:", err)
		os.Exit(1)
	}
}

func walk(addr, kind, dir string) error {
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		return err
	}
	defer rdb.Close()
	c, err := reentrant.New(rdb, reentrant.Options{})
	if err != nil {
		return err
	}
	defer c.Close()
	var l *reentrant.Lock
	switch kind {
	case "lock":
		l = c.Lock("walk")
	case "fair":
		l = c.FairLock("walk")
	case "priority":
		l = c.PriorityLock("walk")
	case "group":
		l = c.GroupLock("walk", "a", "b")
	case "spin":
		l = c.SpinLock("walk", reentrant.Backoff{})
	case "write":
		l = c.ReadWriteLock("walk").WriteLock()
	default:
		return fmt.Errorf("unknown kind %q", kind)
	}
	ctx := context.Background()
	pair := func() error {
		held, err := l.Lock(ctx)
		if err != nil {
			return err
		}
		return l.Unlock(held)
	}
	if err := pair(); err != nil { // the scripts loaded
		return err
	}
	quiet() // no goroutine of the Client's start is still on its way to its wait
	if err := coverage.ClearCounters(); err != nil {
		return err
	}
	if err := pair(); err != nil {
		return err
	}
	if err := coverage.WriteMetaDir(dir); err != nil {
		return err
	}
	return coverage.WriteCountersDir(dir)
}

// quiet returns once every goroutine but the caller is blocked (or after
// a few seconds): a background goroutine the Client started, scheduled late
// on a busy machine, would otherwise run its first lines after the
// counters are cleared and show as entered by the pair.
func quiet() {
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		all := buf[:runtime.Stack(buf, true)]
		if bytes.Count(all, []byte(" [running]:")) == 1 && !bytes.Contains(all, []byte(" [runnable")) {
			return
		}
	}
}
