package reentranttest_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/reentranttest"
)

// lostWithin waits until held ends, and fails t unless it ended with
// ErrLockLost within d.
func lostWithin(t *testing.T, held context.Context, d time.Duration) {
	t.Helper()
	select {
	case <-held.Done():
	case <-time.After(d):
		t.Fatalf("the hold was not lost within %v", d)
	}
	if !errors.Is(context.Cause(held), reentrant.ErrLockLost) {
		t.Fatalf("cause %v, want ErrLockLost", context.Cause(held))
	}
}

// The faults of a Server, each on a hold of its own Client: a pause and
// held-up writes are told late before the loss; a vanished lock and a
// server restarted empty are lost at the next renewal.
func TestServerFaults(t *testing.T) {
	const wd = 900 * time.Millisecond
	for _, c := range []struct {
		name  string
		fault func(s *reentranttest.Server)
		late  bool
	}{
		{"pause", func(s *reentranttest.Server) { s.Pause(); t.Cleanup(s.Resume) }, true},
		{"hold writes", func(s *reentranttest.Server) { s.HoldWrites(2 * wd) }, true},
		{"vanish", func(s *reentranttest.Server) { s.Vanish("job") }, false},
		{"restart empty", func(s *reentranttest.Server) { s.RestartEmpty() }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := reentranttest.StartServer(t)
			late := make(chan reentrant.LateRenewal, 1)
			locks, err := reentrant.New(s.Rueidis(), reentrant.Options{WatchdogTimeout: wd, Hooks: reentrant.Hooks{
				RenewalLate: func(_ context.Context, l reentrant.LateRenewal) { late <- l },
			}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { locks.Close() })
			held, err := locks.Lock("job").Lock(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			c.fault(s)
			lostWithin(t, held, 5*wd)
			select {
			case l := <-late:
				if !c.late {
					t.Fatalf("told late: %+v", l)
				}
			default:
				if c.late {
					t.Fatal("lost without being told late first")
				}
			}
		})
	}
}

// The embedded server's faults: a vanished lock and an emptied server are
// lost at the next renewal.
func TestEmbeddedFaults(t *testing.T) {
	for _, empty := range []bool{false, true} {
		locks, m := reentranttest.New(t, reentrant.Options{WatchdogTimeout: 300 * time.Millisecond})
		held, err := locks.Lock("job").Lock(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if empty {
			reentranttest.Empty(m)
		} else {
			reentranttest.Vanish(m, "job")
		}
		lostWithin(t, held, 3*time.Second)
	}
}

// A job's lock vanishes, as its expiry would, and its held context ends
// with ErrLockLost at the next renewal: what a test of work that must stop
// when its lock is lost plays. In a test, reentranttest.New(t, opts) makes
// the server and the Client in one line; here they are made by hand.
func ExampleVanish() {
	m, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true, AlwaysRESP2: true, ForceSingleClient: true})
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()
	locks, err := reentrant.New(rdb, reentrant.Options{WatchdogTimeout: 300 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()

	held, err := locks.Lock("job").Lock(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	reentranttest.Vanish(m, "job")
	<-held.Done() // at the next renewal, 100ms at most
	fmt.Println(errors.Is(context.Cause(held), reentrant.ErrLockLost))
	// Output: true
}

// A server that stops answering: the holder is told its renewals are late
// (Hooks.RenewalLate) at half of WatchdogTimeout, then loses the hold at
// 0.9 of it. Run it inside a test function, with that test's t.
func ExampleServer_Pause() {
	var t *testing.T // the test's
	s := reentranttest.StartServer(t)
	locks, err := reentrant.New(s.Rueidis(), reentrant.Options{WatchdogTimeout: time.Second, Hooks: reentrant.Hooks{
		RenewalLate: func(_ context.Context, l reentrant.LateRenewal) { fmt.Println("late; lost at", l.Deadline) },
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer locks.Close()
	held, err := locks.Lock("job").Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s.Pause()
	defer s.Resume()
	<-held.Done() // 0.9s after the last renewal
}
