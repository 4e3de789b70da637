package stores

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/relock-go/relock/internal/sqltest"
	"github.com/relock-go/relock/reentrant/fence"
)

// store is one real database with its dialect.
type store struct {
	name string
	d    fence.Dialect
	open func(t *testing.T) *sql.DB
}

var stores = []store{
	{"postgresql", fence.PostgreSQL, func(t *testing.T) *sql.DB { return openDB(t, "pgx", sqltest.Postgres(t).DSN) }},
	{"mariadb", fence.MySQL, func(t *testing.T) *sql.DB { return openDB(t, "mysql", sqltest.MariaDB(t).DSN) }},
	{"sqlite", fence.SQLite, func(t *testing.T) *sql.DB {
		// WAL and a busy timeout: writers wait for each other, as on a
		// server, instead of failing with SQLITE_BUSY.
		dsn := fmt.Sprintf("file:%s?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate", filepath.Join(t.TempDir(), "fence.db"))
		return openDB(t, "sqlite", dsn)
	}},
}

func openDB(t *testing.T, driver, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	require.NoError(t, db.PingContext(context.Background()))
	return db
}

// each runs f on every store, each on a server of its own.
func each(t *testing.T, f func(t *testing.T, s store, db *sql.DB)) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) { f(t, s, s.open(t)) })
	}
}

// guard returns a Guard on db with its table made.
func guard(t *testing.T, db *sql.DB, d fence.Dialect, opts fence.Options) *fence.Guard {
	t.Helper()
	g, err := fence.New(db, d, opts)
	require.NoError(t, err)
	require.NoError(t, g.CreateTable(context.Background()))
	return g
}
