package reentrant

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
)

// goroutineJob records which goroutine ran it, then waits for release.
type goroutineJob struct {
	ran     chan<- string
	release <-chan struct{}
}

func (j goroutineJob) do(*Client) {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	j.ran <- string(b[:bytes.IndexByte(b, '[')]) // "goroutine N "
	<-j.release
}

// Workers outlive their jobs, at most maxIdleWorkers of them, and a job
// handed while one waits goes to it; Close ends them (goleak, in TestMain,
// fails the package if one is left).
func TestWorkersKeptUpToTheBound(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	c, err := New(rdb, Options{})
	require.NoError(t, err)

	const n = maxIdleWorkers + 36
	ran := make(chan string, n)
	release := make(chan struct{})
	for range n {
		require.True(t, c.hand(goroutineJob{ran, release}))
	}
	workers := map[string]bool{}
	for range n { // n jobs at once: n workers
		workers[recv(t, ran)] = true
	}
	require.Len(t, workers, n)
	close(release)
	redistest.Eventually(t, 5*time.Second, "maxIdleWorkers workers waiting", func() bool {
		return c.idleWorkers.Load() == maxIdleWorkers
	})

	// A job goes to a waiting worker. (One handed while none has got back
	// to waiting yet gets a new one, which is why this may take tries.)
	redistest.Eventually(t, 5*time.Second, "a job run by a worker that waited", func() bool {
		require.True(t, c.hand(goroutineJob{ran, release}))
		return workers[<-ran]
	})
	redistest.Eventually(t, 5*time.Second, "maxIdleWorkers workers waiting again", func() bool {
		return c.idleWorkers.Load() == maxIdleWorkers
	})

	require.NoError(t, c.Close())
	require.False(t, c.hand(goroutineJob{ran, release}), "a job handed after Close")
}
