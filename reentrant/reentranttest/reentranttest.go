// Package reentranttest runs relock on an embedded miniredis, for the unit
// tests of code that takes locks, permits, latches or rate limits: one
// line, no server, nothing left running after the test.
//
// miniredis runs relock's scripts, pub/sub and TTLs. It has no WAIT (leave
// Options.ReplicaSync off), no sharded pub/sub (New picks classic, as
// against any server without a cluster), no cluster or Sentinel, and no
// faults: test timing, failover and the Java side against redis-server.
// See docs/testing.md.
package reentranttest

import (
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
)

// New starts a miniredis whose TTLs follow the clock, as a real server's
// do, and returns a relock Client on it made with opts, and the server.
// All of it is closed when the test ends, the Client first. The server
// listens on no port: Rueidis connects more clients to it, in memory.
//
// m.FastForward(d) moves the server's TTLs d ahead, so keys expire early;
// the Client's own deadlines (a LeaseFor hold's end, the watchdog's) follow
// the clock, or a testing/synctest bubble's fake clock when New is called
// inside one.
func New(t testing.TB, opts reentrant.Options) (*reentrant.Client, *miniredis.Miniredis) {
	t.Helper()
	// No TCP listener: connections are in memory (Rueidis dials m.Dial), so
	// nothing blocks on the network and a synctest bubble's clock can move.
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true)
	t.Cleanup(m.Close)
	locks, err := reentrant.New(Rueidis(t, m), opts)
	if err != nil {
		t.Fatalf("reentranttest: %v", err)
	}
	t.Cleanup(func() { locks.Close() }) // runs before the rueidis client's
	return locks, m
}

// Rueidis returns a rueidis client for m, closed when the test ends, with
// the settings miniredis needs: no client-side cache, RESP2 (miniredis
// refuses ordinary commands on a subscribed RESP3 connection), one node
// (rueidis would take miniredis for a one-node cluster), and in-memory
// connections (m.Dial, which also works inside a testing/synctest bubble),
// always pipelined, since an in-memory connection has no buffer. Use it
// for a second Client on the same server, as another process would have.
func Rueidis(t testing.TB, m *miniredis.Miniredis) rueidis.Client {
	t.Helper()
	return redistest.MiniredisClient(t, m, rueidis.ClientOption{InitAddress: []string{"miniredis"}}) // dialled in memory
}
