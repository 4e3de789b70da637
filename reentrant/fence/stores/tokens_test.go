package stores

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/election"
	"github.com/relock-go/relock/reentrant/fence"
)

// fencedStore is a store that checks tokens: the Redis one of package
// election, or a SQL database through a Guard.
type fencedStore struct {
	write func(token int64, v string) error // nil, or refused: stale reports it
	read  func() string
	stale func(err error) bool
}

// eachFencedStore runs f on the Redis fenced store (in a Redis of its own,
// which keeps its data when the lock's loses) and on every SQL store.
func eachFencedStore(t *testing.T, f func(t *testing.T, s fencedStore)) {
	ctx := context.Background()
	t.Run("redis", func(t *testing.T) {
		c, err := reentrant.New(redistest.Start(t).Client(), reentrant.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		fs := election.NewFenced(c)
		f(t, fencedStore{
			write: func(token int64, v string) error { return fs.Set(ctx, "row", election.Term(token), v) },
			read: func() string {
				v, _, err := fs.Get(ctx, "row", election.Term(1<<52))
				require.NoError(t, err)
				return v
			},
			stale: func(err error) bool { return errors.Is(err, election.ErrStaleTerm) },
		})
	})
	each(t, func(t *testing.T, st store, db *sql.DB) {
		g := guard(t, db, st.d, fence.Options{})
		_, err := db.Exec("CREATE TABLE row_value (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
		require.NoError(t, err)
		_, err = db.Exec("INSERT INTO row_value (id, v) VALUES (1, '')")
		require.NoError(t, err)
		f(t, fencedStore{
			write: func(token int64, v string) error {
				update := "UPDATE row_value SET v = ? WHERE id = 1"
				if st.name == "postgresql" {
					update = "UPDATE row_value SET v = $1 WHERE id = 1"
				}
				return g.Do(ctx, "row", token, func(tx *sql.Tx) error {
					_, err := tx.ExecContext(ctx, update, v)
					return err
				})
			},
			read: func() string {
				var v string
				require.NoError(t, db.QueryRow("SELECT v FROM row_value WHERE id = 1").Scan(&v))
				return v
			},
			stale: func(err error) bool { return errors.Is(err, fence.ErrStaleToken) },
		})
	})
}

// pausedHolder takes name's fenced lock for a short lease, lets it write
// first when it should, and returns its token once the lease is over: a
// holder paused past its lease, about to write late.
func pausedHolder(t *testing.T, c *reentrant.Client, name string, s fencedStore, writes bool) int64 {
	t.Helper()
	held, err := c.FencedLock(name).Lock(context.Background(), reentrant.LeaseFor(150*time.Millisecond))
	require.NoError(t, err)
	token, _ := reentrant.TokenFrom(held)
	if writes {
		require.NoError(t, s.write(token, "old"))
	}
	<-held.Done()
	return token
}

// No token steps back when Redis loses the counter under a clock stepped
// back an hour: the drawing client's clock is a floor beside the server's
// (tokenlib.lua), so the new holder's token outranks the paused holder's,
// and the paused holder's late write, its first, is refused. (With the
// server's clock the only floor, the new token is an hour of microseconds
// below, and the late write lands over the new holder's.)
func TestTokenNeverStepsBackAfterCounterLoss(t *testing.T) {
	eachFencedStore(t, func(t *testing.T, s fencedStore) {
		r := redistest.StartClocked(t)
		c, err := reentrant.New(r.Client(), reentrant.Options{})
		require.NoError(t, err)
		defer c.Close()
		old := pausedHolder(t, c, "job", s, false)

		r.RestartEmpty()         // the counter is lost ...
		r.ShiftClock(-time.Hour) // ... and the server's clock steps back
		held, err := c.FencedLock("job").Lock(context.Background())
		require.NoError(t, err)
		token, _ := reentrant.TokenFrom(held)
		assert.Greater(t, token, old, "the new holder's token outranks the old one's")
		require.NoError(t, s.write(token, "new"))
		err = s.write(old, "late")
		assert.True(t, s.stale(err), "the paused holder's late write is refused: %v", err)
		assert.Equal(t, "new", s.read(), "0 stale writes accepted")
		require.NoError(t, c.FencedLock("job").Unlock(held))
	})
}
