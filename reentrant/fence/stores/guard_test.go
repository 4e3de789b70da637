package stores

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/election"
	"github.com/relock-go/relock/reentrant/fence"
)

// A holder paused past its lease writes late: with its fenced lock's
// token, through the Guard, its write is refused once the next holder has
// written, on each store; the next holder's row stands. An election's
// terms fence the same way.
func TestPausedHolderRefused(t *testing.T) {
	s := redistest.Start(t)
	rdb := s.Client()
	locks, err := reentrant.New(rdb, reentrant.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { locks.Close() })
	ctx := context.Background()
	each(t, func(t *testing.T, st store, db *sql.DB) {
		g := guard(t, db, st.d, fence.Options{})
		_, err := db.Exec("CREATE TABLE orders (id VARCHAR(64) PRIMARY KEY, state TEXT NOT NULL)")
		require.NoError(t, err)
		upsert := map[string]string{
			"postgresql": "INSERT INTO orders (id, state) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET state = EXCLUDED.state",
			"mariadb":    "INSERT INTO orders (id, state) VALUES (?, ?) ON DUPLICATE KEY UPDATE state = VALUES(state)",
			"sqlite":     "INSERT INTO orders (id, state) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET state = excluded.state",
		}[st.name]
		writeUnder := func(token int64, state string) error {
			return g.Do(ctx, "order:42", token, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, upsert, "42", state)
				return err
			})
		}
		mu := locks.FencedLock("order:42:" + st.name)
		first, err := mu.Lock(ctx, reentrant.LeaseFor(100*time.Millisecond))
		require.NoError(t, err)
		old, _ := reentrant.TokenFrom(first)
		<-first.Done() // paused past its lease
		second, err := mu.Lock(ctx)
		require.NoError(t, err)
		next, _ := reentrant.TokenFrom(second)
		require.NoError(t, writeUnder(next, "shipped"))
		err = writeUnder(old, "cancelled") // the first holder wakes and writes
		assert.ErrorIs(t, err, fence.ErrStaleToken)
		var state string
		require.NoError(t, db.QueryRow("SELECT state FROM orders WHERE id = '42'").Scan(&state))
		assert.Equal(t, "shipped", state, "the late write did not land")
		require.NoError(t, mu.Unlock(second))
		got, err := g.Token(ctx, "order:42")
		require.NoError(t, err)
		assert.Equal(t, next, got)

		// An election's term is a token like any other.
		e := election.New(locks, "leader:"+st.name, election.Options{})
		leading, term, err := e.Campaign(ctx, "a")
		require.NoError(t, err)
		require.NoError(t, writeUnder(int64(term), "by the leader"))
		assert.Greater(t, int64(term), next, "terms and tokens share the clock floor")
		require.NoError(t, e.Resign(leading))
	})
}

// Do's contract: bad input is ErrInvalidArgument and runs nothing; fn's
// error, or its panic, rolls back its statements and the fence's raise.
func TestGuardContract(t *testing.T) {
	each(t, func(t *testing.T, st store, db *sql.DB) {
		ctx := context.Background()
		_, err := fence.New(nil, st.d, fence.Options{})
		assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
		_, err = fence.New(db, fence.Dialect{}, fence.Options{})
		assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
		_, err = fence.New(db, st.d, fence.Options{Table: "x; DROP TABLE y"})
		assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)

		g := guard(t, db, st.d, fence.Options{Table: "my_fences"})
		noop := func(*sql.Tx) error { return nil }
		for _, bad := range []error{
			g.Do(ctx, "r", 0, noop), g.Do(ctx, "r", -5, noop), g.Do(ctx, "", 1, noop),
			g.Do(ctx, strings.Repeat("x", fence.MaxResource+1), 1, noop), g.Do(ctx, "r", 1, nil),
			g.Do(nil, "r", 1, noop), //nolint:staticcheck // a nil ctx on purpose
			(*fence.Guard)(nil).Do(ctx, "r", 1, noop),
		} {
			assert.ErrorIs(t, bad, reentrant.ErrInvalidArgument)
		}
		got, err := g.Token(ctx, "r")
		require.NoError(t, err)
		assert.Zero(t, got, "nothing raised the fence")

		boom := errors.New("fn failed")
		assert.ErrorIs(t, g.Do(ctx, "r", 7, func(*sql.Tx) error { return boom }), boom)
		assert.Panics(t, func() { _ = g.Do(ctx, "r", 8, func(*sql.Tx) error { panic("fn panicked") }) })
		got, err = g.Token(ctx, "r")
		require.NoError(t, err)
		assert.Zero(t, got, "a failed fn rolls the fence back too")
		require.NoError(t, g.Do(ctx, "r", 3, noop))
		got, _ = g.Token(ctx, "r")
		assert.Equal(t, int64(3), got)
		assert.Contains(t, g.Schema(), "my_fences")
	})
}
