package stores

import (
	"context"
	"crypto/tls"
	"database/sql"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/fence"
)

// faultsEnv sets how many acquisitions TestGuardUnderFaults makes per
// store (300 by default; the soak in docs/fencing.md makes 20,000).
const faultsEnv = "RELOCK_FENCE_FAULTS"

// tally is what the workers of TestGuardUnderFaults saw.
type tally struct {
	acquired, accepted, refused, lost, pauses, crashes, losses, failed, replies atomic.Int64
}

// TestGuardUnderFaults: holders of a fenced lock increment a counter in
// each real store by read-modify-write, each step through the Guard with
// their token, while faults strike: a holder paused past its lease that
// then writes anyway, a holder that crashes holding (its lease runs out),
// Redis losing all its data (FLUSHALL) under the holders, so that two
// believe they hold at once, and replies from Redis lost. The oracle: no increment lost (every accepted
// write read the value it replaced) and the counter equal to the accepted
// writes; the fence refuses what the lock could not stop.
func TestGuardUnderFaults(t *testing.T) {
	n := 300
	if v, err := strconv.Atoi(os.Getenv(faultsEnv)); err == nil && v > 0 {
		n = v
	}
	s := redistest.Start(t)
	each(t, func(t *testing.T, st store, db *sql.DB) {
		ctx := context.Background()
		g := guard(t, db, st.d, fence.Options{})
		_, err := db.Exec("CREATE TABLE counter (id VARCHAR(64) PRIMARY KEY, n BIGINT NOT NULL)")
		require.NoError(t, err)
		_, err = db.Exec("INSERT INTO counter (id, n) VALUES ('c', 0)")
		require.NoError(t, err)
		selectN := map[string]string{"postgresql": "SELECT n FROM counter WHERE id = 'c'"}[st.name]
		if selectN == "" {
			selectN = "SELECT n FROM counter WHERE id = 'c'"
		}
		setN := map[string]string{"postgresql": "UPDATE counter SET n = $1 WHERE id = 'c'"}[st.name]
		if setN == "" {
			setN = "UPDATE counter SET n = ? WHERE id = 'c'"
		}
		var tl tally
		increment := func(token int64) {
			var v int64
			if err := g.Do(ctx, "counter:c", token, func(tx *sql.Tx) error {
				return tx.QueryRowContext(ctx, selectN).Scan(&v)
			}); err != nil {
				tl.count(err)
				return
			}
			err := g.Do(ctx, "counter:c", token, func(tx *sql.Tx) error {
				var now int64
				if err := tx.QueryRowContext(ctx, selectN).Scan(&now); err != nil {
					return err
				}
				if now != v {
					tl.lost.Add(1) // another wrote between this holder's read and write
				}
				_, err := tx.ExecContext(ctx, setN, v+1)
				return err
			})
			if err == nil {
				tl.accepted.Add(1)
			}
			tl.count(err)
		}

		const workers = 4
		left := atomic.Int64{}
		left.Store(int64(n))
		var wg sync.WaitGroup
		for w := range workers {
			// One write in 200 to Redis loses its reply: the connection
			// closes right after the command went out, so the script ran
			// and its caller does not know.
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			var rngMu sync.Mutex
			rdb := s.Client(func(o *rueidis.ClientOption) {
				o.DialCtxFn = func(ctx context.Context, addr string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
					c, err := d.DialContext(ctx, "tcp", addr)
					return lossyConn{Conn: c, lose: func() bool {
						rngMu.Lock()
						defer rngMu.Unlock()
						if rng.IntN(200) == 0 {
							tl.replies.Add(1)
							return true
						}
						return false
					}}, err
				}
			})
			locks, err := reentrant.New(rdb, reentrant.Options{WatchdogTimeout: 300 * time.Millisecond,
				Logger: slog.New(slog.DiscardHandler)})
			require.NoError(t, err)
			t.Cleanup(func() { locks.Close(); rdb.Close() })
			wg.Add(1)
			go func() {
				defer wg.Done()
				mu := locks.FencedLock("counter:" + st.name)
				for left.Add(-1) >= 0 {
					rngMu.Lock()
					fault := rng.IntN(100)
					rngMu.Unlock()
					var opts []reentrant.LockOption
					if fault < 15 { // a lease that runs out under the holder
						opts = append(opts, reentrant.LeaseFor(time.Duration(20+fault*4)*time.Millisecond))
					}
					wait, cancel := context.WithTimeout(ctx, 5*time.Second)
					held, err := mu.Lock(wait, opts...)
					cancel()
					if err != nil {
						tl.failed.Add(1)
						continue
					}
					tl.acquired.Add(1)
					token, _ := reentrant.TokenFrom(held)
					switch {
					case fault < 10: // paused past its lease, then writes anyway
						tl.pauses.Add(1)
						<-held.Done()
						time.Sleep(time.Duration(20+fault*6) * time.Millisecond) // the next holder writes meanwhile
						increment(token)
					case fault < 15: // crashes holding: never writes, never unlocks
						tl.crashes.Add(1)
						<-held.Done()
					case fault < 18: // Redis loses its data under the holder
						tl.losses.Add(1)
						s.Do("FLUSHALL")
						increment(token)
						_ = mu.Unlock(held)
					default:
						increment(token)
						_ = mu.Unlock(held)
					}
				}
			}()
		}
		wg.Wait()
		var final int64
		require.NoError(t, db.QueryRowContext(ctx, selectN).Scan(&final))
		t.Logf("%s: %d acquisitions (%d failed waits), %d pauses, %d crashes, %d data losses, %d lost replies; %d writes accepted, %d refused as stale, %d lost",
			st.name, tl.acquired.Load(), tl.failed.Load(), tl.pauses.Load(), tl.crashes.Load(), tl.losses.Load(), tl.replies.Load(),
			tl.accepted.Load(), tl.refused.Load(), tl.lost.Load())
		assert.Zero(t, tl.lost.Load(), "increments lost: a stale holder's write was accepted")
		assert.Equal(t, tl.accepted.Load(), final, "the counter is the accepted increments")
		assert.Positive(t, tl.refused.Load(), "the faults put stale holders at the store")
	})
}

func (tl *tally) count(err error) {
	if errors.Is(err, fence.ErrStaleToken) {
		tl.refused.Add(1)
	}
}

// lossyConn closes itself right after a write that lose says to lose the
// reply of: the command reaches Redis, its reply never comes back.
type lossyConn struct {
	net.Conn
	lose func() bool
}

func (c lossyConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err == nil && c.lose() {
		c.Conn.Close()
	}
	return n, err
}
