package reentrant_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
)

// writerOf records, for each write naming marker, whether rueidis wrote it
// synchronously, on the caller's goroutine (pipe.syncDo), or from its
// pipelining goroutines.
type writerOf struct {
	net.Conn
	marker       []byte
	sync, piped  *atomic.Int32
	stackScratch []byte
}

func (w *writerOf) Write(b []byte) (int, error) {
	if bytes.Contains(b, w.marker) {
		stack := w.stackScratch[:runtime.Stack(w.stackScratch, false)]
		if bytes.Contains(stack, []byte("rueidis.(*pipe).syncDo")) {
			w.sync.Add(1)
		} else {
			w.piped.Add(1)
		}
	}
	return w.Conn.Write(b)
}

// A client that served a crowd (its shared connection pipelines for good)
// still sends a call made alone synchronously: on a lone wire, written and
// read on the caller's goroutine, whatever ctx it is given.
func TestLoneCallsStaySynchronous(t *testing.T) {
	s := redistest.Start(t)
	var sync, piped atomic.Int32
	c := wrappedClient(t, s, reentrant.Options{}, func(conn net.Conn) net.Conn {
		return &writerOf{Conn: conn, marker: []byte("solo-probe:"), sync: &sync, piped: &piped, stackScratch: make([]byte, 64<<10)}
	})
	ctx, cancel := context.WithCancel(bg())
	defer cancel()
	crowd(t, c, ctx)
	kinds := map[string]func() (context.Context, context.CancelFunc){
		"background": func() (context.Context, context.CancelFunc) { return bg(), func() {} },
		"cancel":     func() (context.Context, context.CancelFunc) { return context.WithCancel(bg()) },
		"deadline":   func() (context.Context, context.CancelFunc) { return context.WithTimeout(bg(), time.Minute) },
	}
	for kind, mk := range kinds {
		l := c.Lock("solo-probe:" + kind)
		for range 10 {
			ctx, cancel := mk()
			held, err := l.Lock(ctx)
			require.NoError(t, err, kind)
			require.NoError(t, l.Unlock(held), kind)
			cancel()
		}
	}
	assert.GreaterOrEqual(t, sync.Load(), int32(60), "pairs' calls written by their callers (a first call's EVALSHA and EVAL both)")
	assert.Zero(t, piped.Load(), "calls made alone handed to the pipelining goroutines")
}

// crowd has 64 goroutines take and give back locks of their own at once,
// some on ctx, so that the client's shared connection pipelines.
func crowd(t *testing.T, c *reentrant.Client, ctx context.Context) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 64 {
		wg.Go(func() {
			l := c.Lock(fmt.Sprintf("crowd:%d", g))
			for range 10 {
				held, err := l.Lock(map[bool]context.Context{true: ctx, false: bg()}[g%2 == 0])
				if err == nil {
					err = l.Unlock(held)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// A lone call's wait is cut when its ctx ends, though Redis is not
// answering: its wire is closed under it, which rueidis does within a
// second when the server is silent (pipe.Close's escape timer), and at
// once when it answers. A ctx's deadline is the socket's: it ends the call
// on time. What the cut attempt may have taken is given back once Redis
// answers again.
func TestLoneCallCutWhileRedisPaused(t *testing.T) {
	s := redistest.Start(t)
	c, err := reentrant.New(s.Client(), reentrant.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	warm := c.Lock("paused:warm") // the lone wire dialled before the pause
	held, err := warm.Lock(bg())
	require.NoError(t, err)
	require.NoError(t, warm.Unlock(held))

	require.NoError(t, s.Do("CLIENT", "PAUSE", "60000", "WRITE").Error())
	t.Cleanup(func() { s.Do("CLIENT", "UNPAUSE") })
	inSync := func(g [][]byte) bool { return bytes.Contains(bytes.Join(g, nil), []byte("rueidis.(*pipe).syncDo")) }

	// Cancelled while the attempt waits for Redis.
	ctx, cancel := context.WithCancel(bg())
	done := make(chan error, 1)
	go func() { _, err := c.Lock("paused:cancel").Lock(ctx); done <- err }()
	redistest.Goroutines(t, "the attempt in flight", 1, inSync)
	cut := time.Now()
	cancel()
	err = <-done
	took := time.Since(cut)
	require.ErrorIs(t, err, context.Canceled)
	// Without the cut: 10 s, rueidis's ConnWriteTimeout; Redis is paused
	// for 60.
	assert.Less(t, took, time.Second+750*time.Millisecond, "returned after ctx ended")

	// A deadline ends it as well.
	ctx, cancel = context.WithTimeout(bg(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.Lock("paused:deadline").Lock(ctx)
	took = time.Since(start)
	require.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	assert.Less(t, took, 200*time.Millisecond+250*time.Millisecond)

	require.NoError(t, s.Do("CLIENT", "UNPAUSE").Error())
	for _, name := range []string{"paused:cancel", "paused:deadline"} {
		require.Eventually(t, func() bool {
			n, err := s.Do("EXISTS", name).AsInt64()
			return err == nil && n == 0
		}, 5*time.Second, 5*time.Millisecond, "%s: what the cut attempt took given back", name)
		held, ok, err := c.Lock(name).TryLock(bg())
		require.NoError(t, err, name)
		require.True(t, ok, "%s: free", name)
		require.NoError(t, c.Lock(name).Unlock(held))
	}
}

// A lone wire whose server cannot run scripts for now (READONLY here: the
// master demoted, its clients left connected) is closed, and the next call
// alone dials another: after a failover, the client's pool is the new
// master's, where a wire kept on the old one would be refused for good.
func TestLoneWireLeavesAServerThatCannotRunScripts(t *testing.T) {
	s, other := redistest.Start(t), redistest.Start(t)
	var dials atomic.Int32
	c := wrappedClient(t, s, reentrant.Options{}, func(conn net.Conn) net.Conn {
		dials.Add(1)
		return conn
	})
	l := c.Lock("solo-demoted")
	held, err := l.Lock(bg())
	require.NoError(t, err)
	require.NoError(t, l.Unlock(held))
	before := dials.Load()

	host, port, _ := net.SplitHostPort(other.Addr)
	require.NoError(t, s.Do("REPLICAOF", host, port).Error())
	_, ok, err := l.TryLock(bg())
	require.Error(t, err, "READONLY")
	assert.False(t, ok)
	require.NoError(t, s.Do("REPLICAOF", "NO", "ONE").Error())
	held, err = l.Lock(bg())
	require.NoError(t, err)
	require.NoError(t, l.Unlock(held))
	assert.Greater(t, dials.Load(), before, "a lone wire dialled again after READONLY")
}
