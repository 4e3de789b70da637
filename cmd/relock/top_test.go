package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
)

// top shows a held lock with a client waiting on it, in a frame for
// people (--once) and as JSON.
func TestTop(t *testing.T) {
	s, relock := server(t)
	locks, held := hold(t, s, "jobs")
	waiter, err := reentrant.New(s.Client(), reentrant.Options{})
	require.NoError(t, err)
	defer waiter.Close()
	got := make(chan error, 1)
	go func() {
		h, err := waiter.Lock("jobs").Lock(context.Background())
		if err == nil {
			err = waiter.Lock("jobs").Unlock(h)
		}
		got <- err
	}()
	eventually(t, "the waiter listens", func() bool {
		n, _ := s.Do("PUBSUB", "NUMSUB", "redisson_lock__channel:{jobs}").AsIntMap()
		return n["redisson_lock__channel:{jobs}"] == 1
	})
	owner, _ := reentrant.OwnerFrom(held)

	code, stdout, stderr := result(t, relock("top", "--once"))
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "1 locks held, 1 clients waiting, 0 queued, 0 deadlocks")
	assert.Regexp(t, `jobs +lock +[0-9.]+s +1 +0 +`+owner.String()+`×1`, stdout)

	code, stdout, stderr = result(t, relock("top", "--once", "--json", "jo*"))
	require.Equal(t, 0, code, stderr)
	var f topFrame
	require.NoError(t, json.Unmarshal([]byte(stdout), &f), stdout)
	require.Len(t, f.Locks, 1)
	assert.Equal(t, "jobs", f.Locks[0].Name)
	assert.Equal(t, int64(1), f.Locks[0].WaitingClients)
	assert.Equal(t, owner.String(), f.Locks[0].Holders[0].Owner)

	require.NoError(t, locks.Lock("jobs").Unlock(held))
	require.NoError(t, redistest.Recv(t, got))
	code, stdout, _ = result(t, relock("top", "--once", "--json"))
	require.Equal(t, 0, code)
	require.NoError(t, json.Unmarshal([]byte(stdout), &f))
	assert.Empty(t, f.Locks, "nothing held")
	code, _, _ = result(t, relock("top", "--sort", "size"))
	assert.Equal(t, 2, code)
}

// BenchmarkTopFrame measures what one frame of top costs the server with
// 1,000 locks held: the commands it sends (INFO commandstats, before and
// after) and how long it takes to read.
//
//	go test -run '^$' -bench TopFrame -benchtime 10x ./cmd/relock
func BenchmarkTopFrame(b *testing.B) {
	s := redistest.Start(b)
	rdb := s.Client()
	locks, err := reentrant.New(rdb, reentrant.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer locks.Close()
	for i := range 1000 {
		if _, err := locks.Lock(fmt.Sprintf("held-%d", i)).Lock(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	calls := func() int64 {
		var n int64
		for _, c := range s.CommandStats() {
			n += c.Calls
		}
		return n
	}
	before := calls()
	for b.Loop() {
		f, err := topFrameOf(context.Background(), rdb, locks, "*", "waiting")
		if err != nil || len(f.Locks) != 1000 {
			b.Fatalf("%d locks, %v", len(f.Locks), err)
		}
	}
	// The watchdog's renewals and the stats' own INFO run meanwhile: less
	// than one command per frame at these lengths.
	b.ReportMetric(float64(calls()-before)/float64(b.N), "commands/frame")
}
