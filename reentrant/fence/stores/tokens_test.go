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
	seen  func() int64 // the largest token the store has seen
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
			seen: func() int64 {
				n, err := fs.Seen(ctx, "row")
				require.NoError(t, err)
				return int64(n)
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
			seen: func() int64 {
				n, err := g.Token(ctx, "row")
				require.NoError(t, err)
				return n
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

// When both floors stood behind (the server's clock ran an hour ahead
// while the old holder drew, and was set right after the counter was
// lost), the new holder draws a token below the old one's, and a store the
// old holder wrote refuses the new one. The new holder, proving it holds
// the lock, takes a token past the store's (fence.TokenPast) and writes;
// from then on the store refuses the old holder's late write, and the old
// holder cannot take a token past anything. 0 stale writes accepted.
func TestTokenPastRecoversAfterClockCorrected(t *testing.T) {
	eachFencedStore(t, func(t *testing.T, s fencedStore) {
		r := redistest.StartClocked(t)
		c, err := reentrant.New(r.Client(), reentrant.Options{})
		require.NoError(t, err)
		defer c.Close()
		r.ShiftClock(time.Hour)
		oldHeld, err := c.FencedLock("job").Lock(context.Background(), reentrant.LeaseFor(150*time.Millisecond))
		require.NoError(t, err)
		old, _ := reentrant.TokenFrom(oldHeld)
		require.NoError(t, s.write(old, "old"))
		<-oldHeld.Done() // paused past its lease

		r.RestartEmpty() // the counter is lost ...
		r.ShiftClock(0)  // ... and the server's clock set right
		held, err := c.FencedLock("job").Lock(context.Background())
		require.NoError(t, err)
		token, _ := reentrant.TokenFrom(held)
		require.Less(t, token, old, "the case: the new token is below the old holder's")
		err = s.write(token, "new")
		require.True(t, s.stale(err), "the store refuses the new holder at first: %v", err)

		past, err := fence.TokenPast(held, c, "job", s.seen())
		require.NoError(t, err)
		next, _ := reentrant.TokenFrom(past)
		assert.Greater(t, next, old)
		require.NoError(t, s.write(next, "new"))
		err = s.write(old, "late")
		assert.True(t, s.stale(err), "the paused holder's late write is refused: %v", err)
		assert.Equal(t, "new", s.read(), "0 stale writes accepted")
		_, err = fence.TokenPast(oldHeld, c, "job", s.seen())
		assert.Error(t, err, "an ended hold takes no token")
		require.NoError(t, c.FencedLock("job").Unlock(past), "the hold is released as before")
	})
}

// TokenPast refuses what is not a live hold of the fenced lock, changing
// nothing: a nil ctx, a token below 1, a plain lock's hold, a nil Client
// (ErrInvalidArgument); a hold of the lock that another owner has taken
// over since (ErrNotHeld).
func TestTokenPastRefuses(t *testing.T) {
	r := redistest.Start(t)
	c, err := reentrant.New(r.Client(), reentrant.Options{})
	require.NoError(t, err)
	defer c.Close()
	ctx := context.Background()
	plain, err := c.Lock("plain").Lock(ctx)
	require.NoError(t, err)
	held, err := c.FencedLock("job").Lock(ctx)
	require.NoError(t, err)
	token, _ := reentrant.TokenFrom(held)
	for what, call := range map[string]func() (context.Context, error){
		"nil ctx":    func() (context.Context, error) { return fence.TokenPast(nil, c, "job", 1) }, //nolint:staticcheck // the case
		"token 0":    func() (context.Context, error) { return fence.TokenPast(held, c, "job", 0) },
		"plain hold": func() (context.Context, error) { return fence.TokenPast(plain, c, "plain", 1) },
		"nil Client": func() (context.Context, error) { return fence.TokenPast(held, nil, "job", 1) },
		"not a hold": func() (context.Context, error) { return fence.TokenPast(ctx, c, "job", 1) },
	} {
		_, err := call()
		assert.ErrorIs(t, err, reentrant.ErrInvalidArgument, what)
	}
	n, err := r.Do("GET", "redisson_lock_token:{job}").AsInt64()
	require.NoError(t, err)
	assert.Equal(t, token, n, "nothing drawn")

	_, err = c.FencedLock("job").ForceUnlock(ctx)
	require.NoError(t, err)
	d, err := reentrant.New(r.Client(), reentrant.Options{})
	require.NoError(t, err)
	defer d.Close()
	other, err := d.FencedLock("job").Lock(ctx)
	require.NoError(t, err)
	_, err = fence.TokenPast(held, c, "job", 1)
	assert.True(t, errors.Is(err, reentrant.ErrNotHeld) || errors.Is(err, reentrant.ErrLockLost),
		"a hold taken over is refused, or found lost first: %v", err)
	require.NoError(t, d.FencedLock("job").Unlock(other))
	require.NoError(t, c.Lock("plain").Unlock(plain))
}
