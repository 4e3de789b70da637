package stores

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/fence"
	"github.com/relock-go/relock/reentrant/fence/fencetest"
)

// rowStore is a store of one's own, as a team might write it: a fence
// column on the value's own row, compared in the UPDATE that writes it.
// Its bugs can be planted, one at a time, to show the kit catches each.
type rowStore struct {
	db  *sql.DB
	bug string
}

func (s *rowStore) cmp() string {
	switch s.bug {
	case "no predicate":
		return "1 = 1"
	case "< for <=":
		return "token < ?"
	}
	return "token <= ?"
}

// raise raises r's fence to token in tx: the row's token, compared in the
// UPDATE, or a new row.
func (s *rowStore) raise(ctx context.Context, tx *sql.Tx, r string, token int64, set string, args ...any) error {
	if token < 1 {
		return fmt.Errorf("token %d: %w", token, reentrant.ErrInvalidArgument)
	}
	where := "resource = ? AND " + s.cmp()
	whereArgs := []any{r}
	if s.bug != "no predicate" {
		whereArgs = append(whereArgs, token)
	}
	res, err := tx.ExecContext(ctx, "UPDATE kv SET token = ?"+set+" WHERE "+where, append(append([]any{token}, args...), whereArgs...)...)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n > 0 {
		return nil
	}
	res, err = tx.ExecContext(ctx, "INSERT OR IGNORE INTO kv (resource, token, value) VALUES (?, ?, '')", r, token)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fence.ErrStaleToken
	}
	if set != "" {
		_, err = tx.ExecContext(ctx, "UPDATE kv SET token = ?"+set+" WHERE resource = ?", append(append([]any{token}, args...), r)...)
	}
	return err
}

func (s *rowStore) do(ctx context.Context, f func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func (s *rowStore) Write(ctx context.Context, r string, token int64, v string) error {
	return s.do(ctx, func(tx *sql.Tx) error { return s.raise(ctx, tx, r, token, ", value = ?", v) })
}

func (s *rowStore) Read(ctx context.Context, r string, token int64) (string, error) {
	var v string
	err := s.do(ctx, func(tx *sql.Tx) error {
		if s.bug == "reads do not raise the fence" {
			var seen int64
			err := tx.QueryRowContext(ctx, "SELECT token, value FROM kv WHERE resource = ?", r).Scan(&seen, &v)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				return nil
			case err == nil && seen > token:
				return fence.ErrStaleToken
			}
			return err
		}
		if err := s.raise(ctx, tx, r, token, ""); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, "SELECT value FROM kv WHERE resource = ?", r).Scan(&v)
	})
	return v, err
}

// TestKitCatchesPlantedBugs: the kit passes the store as written, and
// fails it with each of three bugs planted: no token predicate, < for
// <=, and reads that do not raise the fence.
func TestKitCatchesPlantedBugs(t *testing.T) {
	db := openDB(t, "sqlite", fmt.Sprintf("file:%s?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate",
		filepath.Join(t.TempDir(), "kv.db")))
	_, err := db.Exec("CREATE TABLE kv (resource TEXT PRIMARY KEY, token INTEGER NOT NULL, value TEXT NOT NULL)")
	require.NoError(t, err)
	ctx := context.Background()
	assert.Empty(t, fencetest.Check(ctx, "sound/", &rowStore{db: db}), "the store as written keeps every promise")
	for _, bug := range []string{"no predicate", "< for <=", "reads do not raise the fence"} {
		errs := fencetest.Check(ctx, bug+"/", &rowStore{db: db, bug: bug})
		assert.NotEmpty(t, errs, "the kit missed: %s", bug)
		t.Logf("%s: caught by %d promises: %v", bug, len(errs), errors.Join(errs...))
	}
}
