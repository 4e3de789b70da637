// Package stores tests package fence on real databases, through their
// drivers: PostgreSQL (pgx), MariaDB (go-sql-driver/mysql) and SQLite
// (modernc.org/sqlite, pure Go). It is a module of its own, so that no
// driver enters relock's main module; it holds tests only.
package stores
