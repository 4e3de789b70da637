// Package fence checks fencing tokens where a lock's data lives: in a SQL
// database, in the same transaction as the holder's own statements. A lock
// is exclusive in Redis, but a holder paused past its lease (a GC pause, a
// stopped VM, a slow network) wakes up believing it still holds, and its
// late UPDATE lands after the next holder's. Tokens stop that only if
// something compares them at the store: this package does, so that the
// data is never written by two holders, not only the lock never held by
// two.
//
// A Guard keeps, per resource, the largest token that has used it, in a
// table of its own (Schema gives the DDL). Do runs the caller's statements
// in a transaction that first raises the resource's fence to its token:
//
//	UPDATE relock_fence SET token = $1, uses = uses + 1
//	    WHERE resource = $2 AND token <= $1
//
// (with an insert for a resource's first use). When a larger token has
// used the resource, nothing runs, the transaction is rolled back and Do
// returns ErrStaleToken. The UPDATE locks the fence's row until the
// transaction ends, so guarded transactions on one resource run one after
// another: a stale holder either ends before the newer one starts, or is
// refused. Reads go through Do too: a read raises the fence as a write
// does, so a stale holder cannot read, wait, and write back around a newer
// holder that has read. The same token may use the resource again (a
// holder's many writes); a smaller one never again.
//
// Tokens are a fenced lock's (reentrant.TokenFrom), an election's terms,
// or the Kubernetes lock's terms: all of them only grow.
//
// What it does not do: check a statement that does not go through Do.
// docs/fencing.md gives triggers for PostgreSQL and MariaDB that refuse a
// stale token on the rows themselves, whoever writes them.
package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"

	"github.com/relock-go/relock/reentrant"
)

// ErrStaleToken: a larger token has used the resource: the holder of this
// one has lost the lock (or the leadership) since, and must not write.
var ErrStaleToken = errors.New("stale token: a newer holder has used the resource")

// A Dialect is how a Guard speaks to one kind of database.
type Dialect struct {
	name string
	// placeholder returns the n-th (1-based) parameter's placeholder.
	placeholder func(n int) string
	// insertAbsent inserts a row unless its key is there.
	insertAbsent string
	// bigint is the column type of tokens: 64-bit signed.
	bigint, text string
}

// The dialects a Guard speaks. Each needs the isolation level its
// database starts with (see docs/fencing.md): READ COMMITTED on
// PostgreSQL, REPEATABLE READ on MySQL and MariaDB, SQLite's serialized
// writes; the fence's row lock, taken by the first statement, is what
// orders holders.
var (
	// PostgreSQL 12 or later ($1 placeholders, ON CONFLICT).
	PostgreSQL = Dialect{name: "postgresql", placeholder: func(n int) string { return fmt.Sprintf("$%d", n) },
		insertAbsent: "INSERT INTO %s (resource, token, uses) VALUES (%s, %s, 1) ON CONFLICT (resource) DO NOTHING",
		bigint:       "BIGINT", text: "TEXT"}
	// MySQL 5.7 or later and MariaDB 10.3 or later (? placeholders, INSERT
	// IGNORE), InnoDB.
	MySQL = Dialect{name: "mysql", placeholder: func(int) string { return "?" },
		insertAbsent: "INSERT IGNORE INTO %s (resource, token, uses) VALUES (%s, %s, 1)",
		bigint:       "BIGINT", text: "VARCHAR(255)"}
	// SQLite 3.24 or later (? placeholders, INSERT OR IGNORE).
	SQLite = Dialect{name: "sqlite", placeholder: func(int) string { return "?" },
		insertAbsent: "INSERT OR IGNORE INTO %s (resource, token, uses) VALUES (%s, %s, 1)",
		bigint:       "INTEGER", text: "TEXT"}
)

// String names the dialect.
func (d Dialect) String() string { return d.name }

// MaxResource is the longest resource name, in bytes: the fence table's
// key is a VARCHAR(255) on MySQL and MariaDB.
const MaxResource = 255

// Options set how New makes a Guard. The zero Options are the defaults.
type Options struct {
	// Table is the fence table's name: "relock_fence" if empty. Letters,
	// digits, _ and one . (a schema) only.
	Table string
	// TxOptions are the transactions' options: the database's default
	// isolation level if nil.
	TxOptions *sql.TxOptions
}

// Guard runs statements under tokens on one database. It is safe for
// concurrent use.
type Guard struct {
	db    *sql.DB
	d     Dialect
	table string
	tx    *sql.TxOptions
	raise string // the fence's UPDATE
	first string // the fence's INSERT for a resource's first use
}

var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// New returns a Guard on db, which speaks d. A nil db, a Dialect that is
// not one of this package's, or a table name that is not a plain name is
// reentrant.ErrInvalidArgument. It does nothing on the database: create
// the table with CreateTable, or with Schema's DDL in a migration.
func New(db *sql.DB, d Dialect, opts Options) (*Guard, error) {
	table := opts.Table
	if table == "" {
		table = "relock_fence"
	}
	switch {
	case db == nil:
		return nil, fmt.Errorf("relock: fence: %w: a nil *sql.DB", reentrant.ErrInvalidArgument)
	case d.placeholder == nil:
		return nil, fmt.Errorf("relock: fence: %w: the zero Dialect (use fence.PostgreSQL, fence.MySQL or fence.SQLite)", reentrant.ErrInvalidArgument)
	case !tableName.MatchString(table):
		return nil, fmt.Errorf("relock: fence: %w: table %q is not a plain name", reentrant.ErrInvalidArgument, table)
	}
	p := d.placeholder
	return &Guard{db: db, d: d, table: table, tx: opts.TxOptions,
		raise: fmt.Sprintf("UPDATE %s SET token = %s, uses = uses + 1 WHERE resource = %s AND token <= %s", table, p(1), p(2), p(3)),
		first: fmt.Sprintf(d.insertAbsent, table, p(1), p(2)),
	}, nil
}

// Schema returns the DDL of the fence table: one row per resource, with
// the largest token that has used it, and how many guarded transactions
// have.
func (g *Guard) Schema() string {
	return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (resource %s NOT NULL PRIMARY KEY, token %s NOT NULL, uses %s NOT NULL)",
		g.table, g.d.text, g.d.bigint, g.d.bigint)
}

// CreateTable creates the fence table if it is not there.
func (g *Guard) CreateTable(ctx context.Context) error {
	if _, err := g.db.ExecContext(ctx, g.Schema()); err != nil {
		return fmt.Errorf("relock: fence: creating %s: %w", g.table, err)
	}
	return nil
}

// Do runs fn in a transaction on resource under token: it first raises
// the resource's fence to token, then runs fn, then commits. When a larger
// token has used the resource it runs nothing and returns an error
// wrapping ErrStaleToken; when fn returns an error (or panics) the
// transaction is rolled back and Do returns fn's error. A token below 1,
// an empty resource or one longer than MaxResource is
// reentrant.ErrInvalidArgument, and a nil ctx or fn too. fn must use tx for every statement that the token guards.
func (g *Guard) Do(ctx context.Context, resource string, token int64, fn func(tx *sql.Tx) error) (err error) {
	switch {
	case g == nil || ctx == nil || fn == nil:
		return fmt.Errorf("relock: fence: %w: a nil Guard, ctx or fn", reentrant.ErrInvalidArgument)
	case resource == "" || len(resource) > MaxResource:
		return fmt.Errorf("relock: fence: %w: resource %q: 1 to %d bytes", reentrant.ErrInvalidArgument, resource, MaxResource)
	case token < 1:
		return fmt.Errorf("relock: fence %q: %w: token %d (tokens and terms start at 1)", resource, reentrant.ErrInvalidArgument, token)
	}
	tx, err := g.db.BeginTx(ctx, g.tx)
	if err != nil {
		return fmt.Errorf("relock: fence %q: %w", resource, err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = tx.Rollback()
		}
	}()
	if err := g.raiseFence(ctx, tx, resource, token); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("relock: fence %q: commit: %w", resource, err)
	}
	committed = true
	return nil
}

// raiseFence raises resource's fence to token in tx, or returns
// ErrStaleToken: an UPDATE that matches when no larger token is there;
// when it matches nothing, an insert for a first use; when that inserts
// nothing either (another made the row meanwhile), the UPDATE again, which
// now finds the row.
func (g *Guard) raiseFence(ctx context.Context, tx *sql.Tx, resource string, token int64) error {
	for try := 0; try < 2; try++ {
		n, err := affected(tx.ExecContext(ctx, g.raise, token, resource, token))
		if err != nil {
			return fmt.Errorf("relock: fence %q: raising the fence: %w", resource, err)
		}
		if n > 0 {
			return nil
		}
		if try == 1 {
			break
		}
		if n, err = affected(tx.ExecContext(ctx, g.first, resource, token)); err != nil {
			return fmt.Errorf("relock: fence %q: raising the fence: %w", resource, err)
		}
		if n > 0 {
			return nil
		}
	}
	return fmt.Errorf("relock: fence %q: %w (token %d)", resource, ErrStaleToken, token)
}

func affected(r sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

// Token returns the largest token that has used resource, 0 for none.
func (g *Guard) Token(ctx context.Context, resource string) (int64, error) {
	var token int64
	err := g.db.QueryRowContext(ctx, fmt.Sprintf("SELECT token FROM %s WHERE resource = %s", g.table, g.d.placeholder(1)), resource).Scan(&token)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("relock: fence %q: %w", resource, err)
	}
	return token, nil
}
