package attempt

import (
	"bytes"
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/relock-go/relock/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// goroutineJob records which goroutine ran it, then waits for release.
type goroutineJob struct {
	ran     chan<- string
	release <-chan struct{}
}

func (j goroutineJob) do(*Workers) {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	j.ran <- string(b[:bytes.IndexByte(b, '[')]) // "goroutine N "
	<-j.release
}

// client stands for the Client the workers belong to: start runs a
// goroutine until close, which waits for them all.
type client struct {
	closing context.Context
	close   context.CancelFunc
	mu      sync.Mutex
	closed  bool
	tasks   sync.WaitGroup
}

func (c *client) start(task func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.tasks.Add(1)
	go func() {
		defer c.tasks.Done()
		task()
	}()
	return true
}

func (c *client) shut() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.close()
	c.tasks.Wait()
}

// Workers outlive their jobs, at most maxIdle of them, and a job handed
// while one waits goes to it; the client's Close ends them (goleak, in
// TestMain, fails the package if one is left).
func TestWorkersKeptUpToTheBound(t *testing.T) {
	c := &client{}
	c.closing, c.close = context.WithCancel(context.Background())
	w := New(c.closing, c.start, time.Second)

	const n = maxIdle + 36
	ran := make(chan string, n)
	release := make(chan struct{})
	for range n {
		require.True(t, w.hand(goroutineJob{ran, release}))
	}
	workers := map[string]bool{}
	for range n { // n jobs at once: n workers
		workers[redistest.Recv(t, ran)] = true
	}
	require.Len(t, workers, n)
	close(release)
	redistest.Eventually(t, 5*time.Second, "maxIdle workers waiting", func() bool {
		return w.waiting.Load() == maxIdle
	})

	// A job goes to a waiting worker. (One handed while none has got back
	// to waiting yet gets a new one, which is why this may take tries.)
	redistest.Eventually(t, 5*time.Second, "a job run by a worker that waited", func() bool {
		require.True(t, w.hand(goroutineJob{ran, release}))
		return workers[redistest.Recv(t, ran)]
	})
	redistest.Eventually(t, 5*time.Second, "maxIdle workers waiting again", func() bool {
		return w.waiting.Load() == maxIdle
	})

	c.shut()
	require.False(t, w.hand(goroutineJob{ran, release}), "a job handed after Close")
}
